// Where CUPTI's transfer records put each page of the program's memory, and
// what that shows they left out.
//
// A page the records show arriving on the GPU again, with no record of it
// leaving since it last arrived, left without one: a device-to-host copy
// CUPTI did not record (the GPU was full, so the page had to go). The
// likeliest cause: the UVM driver drops a tools event when the queue CUPTI
// reads from is full, counting it only in that queue's control block
// (uvm_tools.c), and CUPTI's dropped-record count stays 0 in every run that
// lost records. On the H200 it happens mostly in
// runs where the policy pre-evicts (`cudaMemPrefetchAsync` to the host),
// and in some demand runs on some machines (docs/fidelity.md, "CUPTI's
// missing write-backs"). The count is a lower bound: a page that left
// unrecorded and never came back, or came back as a populate, is not seen.
//
// Records reach the backend in batches that need not be in time order
// across batches, so the ledger keeps every transfer and settles the pages
// in start-time order when asked.
#ifndef UMLAB_BACKENDS_CUDA_TRANSFER_LEDGER_H_
#define UMLAB_BACKENDS_CUDA_TRANSFER_LEDGER_H_

#include <cstdint>
#include <vector>

namespace umlab::cuda {

class TransferLedger {
 public:
  // A transfer record in the program's memory: `bytes` from
  // `program_address`, to the GPU or from it, begun at `start_ns`.
  void Note(uint64_t start_ns, uint64_t program_address, uint64_t bytes, bool to_device);

  // Bytes of pages the records show arriving while, by the records, they
  // were on the GPU already.
  uint64_t UnrecordedDepartureBytes() const;

 private:
  struct Transfer {
    uint64_t start_ns;
    uint64_t address;
    uint64_t bytes;
    bool to_device;
  };
  std::vector<Transfer> transfers_;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_TRANSFER_LEDGER_H_
