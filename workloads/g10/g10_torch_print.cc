#include "workloads/g10/g10_torch_print.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "workloads/g10/g10_graph_builder.h"

namespace umlab {

namespace {

// Nesting deeper than this is not a model print (and would exhaust the stack).
constexpr int kMaxDepth = 64;

enum class TokenKind { kIdent, kInt, kFloat, kPunct, kEnd };

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;
  int line = 0;
};

absl::Status Tokenize(const std::string& text, const std::string& source,
                      std::vector<Token>& tokens) {
  int line = 1;
  size_t i = 0;
  auto is_digit = [&](size_t at) {
    return at < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[at]));
  };
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line;
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
    } else if (absl::ascii_isalpha(c) || c == '_') {
      const size_t begin = i;
      while (i < text.size() && (absl::ascii_isalnum(static_cast<unsigned char>(text[i])) ||
                                 text[i] == '_')) {
        ++i;
      }
      tokens.push_back({TokenKind::kIdent, text.substr(begin, i - begin), line});
    } else if (absl::ascii_isdigit(c)) {
      const size_t begin = i;
      bool real = false;
      while (is_digit(i)) ++i;
      if (i < text.size() && text[i] == '.') {
        real = true;
        ++i;
        while (is_digit(i)) ++i;
      }
      if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
        size_t at = i + 1;
        if (at < text.size() && (text[at] == '+' || text[at] == '-')) ++at;
        if (is_digit(at)) {
          real = true;
          i = at;
          while (is_digit(i)) ++i;
        }
      }
      tokens.push_back(
          {real ? TokenKind::kFloat : TokenKind::kInt, text.substr(begin, i - begin), line});
    } else if (c == '(' || c == ')' || c == ':' || c == '=' || c == ',') {
      tokens.push_back({TokenKind::kPunct, std::string(1, static_cast<char>(c)), line});
      ++i;
    } else {
      return G10LineError(
          source, line,
          absl::StrFormat("unexpected character '%s' in a PyTorch model print; %s",
                          absl::CHexEscape(std::string(1, static_cast<char>(c))), kG10RecopyNet));
    }
  }
  tokens.push_back({TokenKind::kEnd, "", line});
  return absl::OkStatus();
}

bool IsOperatorType(const std::string& type) {
  return type == "Conv2d" || type == "ReLU" || type == "MaxPool2d" ||
         type == "AdaptiveAvgPool2d" || type == "Linear" || type == "Dropout" ||
         type == "BatchNorm2d";
}

constexpr char kOperatorList[] =
    "Conv2d, ReLU, MaxPool2d, AdaptiveAvgPool2d, Linear, Dropout, BatchNorm2d";

class PrintParser {
 public:
  PrintParser(const std::vector<Token>& tokens, const std::string& source)
      : tokens_(tokens), source_(source) {}

  absl::Status ParseModel(TorchModule& model) {
    if (absl::Status s = ParseModule(model, 0); !s.ok()) return s;
    if (Peek().kind != TokenKind::kEnd) {
      return Unexpected(Peek(), "the end of the file after the model's closing ')'");
    }
    return absl::OkStatus();
  }

 private:
  const Token& Peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& Next() {
    const Token& token = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return token;
  }
  bool IsPunct(const Token& token, char c) const {
    return token.kind == TokenKind::kPunct && token.text[0] == c;
  }

  absl::Status Unexpected(const Token& token, const std::string& expected) const {
    const std::string found = token.kind == TokenKind::kEnd ? "the end of the file"
                                                            : absl::StrCat("'", token.text, "'");
    return G10LineError(source_, token.line,
                        absl::StrFormat("expected %s, found %s; the print text is cut short or "
                                        "edited: %s",
                                        expected, found, kG10RecopyNet));
  }

  absl::Status ExpectPunct(char c) {
    if (!IsPunct(Peek(), c)) return Unexpected(Peek(), absl::StrCat("'", std::string(1, c), "'"));
    Next();
    return absl::OkStatus();
  }

  // Type '(' (entries | arguments) ')'
  absl::Status ParseModule(TorchModule& module, int depth) {
    if (depth > kMaxDepth) {
      return G10LineError(source_, Peek().line,
                          absl::StrFormat("modules nest deeper than %d; this is not a model print",
                                          kMaxDepth));
    }
    if (Peek().kind != TokenKind::kIdent) return Unexpected(Peek(), "a module type such as Conv2d");
    const Token& type = Next();
    module.type = type.text;
    module.line = type.line;
    if (absl::Status s = ExpectPunct('('); !s.ok()) return s;
    if (IsOperatorType(module.type)) {
      module.is_operator = true;
      if (absl::Status s = ParseArgs(module); !s.ok()) return s;
    } else if (IsPunct(Peek(), '(')) {
      while (IsPunct(Peek(), '(')) {
        module.children.emplace_back();
        if (absl::Status s = ParseEntry(module.children.back(), depth + 1); !s.ok()) return s;
      }
    } else {
      return G10LineError(
          source_, module.line,
          absl::StrFormat("'%s' is not an operator G10 models (%s) and holds no entries; "
                          "G10's grammar has no such layer, so replace or remove it",
                          module.type, kOperatorList));
    }
    return ExpectPunct(')');
  }

  // '(' label ')' ':' module
  absl::Status ParseEntry(TorchModule& module, int depth) {
    if (absl::Status s = ExpectPunct('('); !s.ok()) return s;
    if (Peek().kind != TokenKind::kIdent && Peek().kind != TokenKind::kInt) {
      return Unexpected(Peek(), "an entry label such as conv1 or 0");
    }
    module.label = Next().text;
    if (absl::Status s = ExpectPunct(')'); !s.ok()) return s;
    if (absl::Status s = ExpectPunct(':'); !s.ok()) return s;
    return ParseModule(module, depth);
  }

  // [key '='] value {',' [key '='] value}, up to the closing ')'.
  absl::Status ParseArgs(TorchModule& module) {
    if (IsPunct(Peek(), ')')) return absl::OkStatus();
    while (true) {
      TorchArg arg;
      if (Peek().kind == TokenKind::kIdent && IsPunct(Peek(1), '=')) {
        arg.key = Next().text;
        Next();
      }
      if (absl::Status s = ParseValue(arg.value); !s.ok()) return s;
      module.args.push_back(std::move(arg));
      if (!IsPunct(Peek(), ',')) return absl::OkStatus();
      Next();
    }
  }

  absl::Status ParseInt(int64_t& value) {
    if (Peek().kind != TokenKind::kInt) return Unexpected(Peek(), "an integer");
    const Token& token = Next();
    if (!absl::SimpleAtoi(token.text, &value) || value > kG10MaxNetInteger) {
      return G10LineError(source_, token.line,
                          absl::StrFormat("value %s is above %d; a number is corrupt: %s",
                                          token.text, kG10MaxNetInteger, kG10RecopyNet));
    }
    return absl::OkStatus();
  }

  absl::Status ParseValue(TorchValue& value) {
    const Token& token = Peek();
    if (token.kind == TokenKind::kInt) {
      value.kind = TorchValue::Kind::kInt;
      return ParseInt(value.first);
    }
    if (token.kind == TokenKind::kFloat) {
      value.kind = TorchValue::Kind::kFloat;
      Next();
      return absl::OkStatus();
    }
    if (token.kind == TokenKind::kIdent && (token.text == "True" || token.text == "False")) {
      value.kind = TorchValue::Kind::kBool;
      value.flag = token.text == "True";
      Next();
      return absl::OkStatus();
    }
    if (IsPunct(token, '(')) {
      Next();
      value.kind = TorchValue::Kind::kPair;
      if (absl::Status s = ParseInt(value.first); !s.ok()) return s;
      if (absl::Status s = ExpectPunct(','); !s.ok()) return s;
      if (absl::Status s = ParseInt(value.second); !s.ok()) return s;
      return ExpectPunct(')');
    }
    return Unexpected(token, "a value (an integer, a number, True, False or (a, b))");
  }

  const std::vector<Token>& tokens_;
  const std::string& source_;
  size_t pos_ = 0;
};

}  // namespace

absl::Status ParseTorchPrint(const std::string& text, const std::string& source,
                             TorchModule& root) {
  std::vector<Token> tokens;
  if (absl::Status s = Tokenize(text, source, tokens); !s.ok()) return s;
  return PrintParser(tokens, source).ParseModel(root);
}

}  // namespace umlab
