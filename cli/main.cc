#include <sys/ioctl.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // The progress line is drawn only on a terminal, and fits its width.
  int err_columns = 0;
  if (isatty(STDERR_FILENO)) {
    winsize size{};
    const bool known = ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 1;
    err_columns = known ? size.ws_col : 80;
  }
  return umlab::cli::Main(args, std::cout, std::cerr, err_columns);
}
