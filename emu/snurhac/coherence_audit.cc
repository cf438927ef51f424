#include "emu/snurhac/coherence_audit.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace umlab::snurhac {
namespace {

uint32_t Lookup(const absl::flat_hash_map<PageNumber, uint32_t>& versions, PageNumber page) {
  auto it = versions.find(page);
  return it == versions.end() ? 0 : it->second;
}

std::string Holder(int holder) {
  return holder == kHost ? std::string("the host") : absl::StrCat("device ", holder);
}

}  // namespace

CoherenceAudit::CoherenceAudit(int devices, const CoherenceDirectory& directory,
                               const DeviceMappings& mappings)
    : devices_(devices), directory_(directory), mappings_(mappings), copies_(devices) {}

uint32_t CoherenceAudit::Latest(PageNumber page) const { return Lookup(latest_, page); }
uint32_t CoherenceAudit::AtHost(PageNumber page) const { return Lookup(host_, page); }

absl::StatusOr<uint32_t> CoherenceAudit::CopyAt(int device, PageNumber page) const {
  auto it = copies_[device].find(page);
  if (it == copies_[device].end()) {
    return absl::InternalError(absl::StrFormat(
        "coherence: device %d is named as holding page %#x, which it does not map", device, page));
  }
  return it->second;
}

void CoherenceAudit::Wrote(int device, PageNumber page) {
  copies_[device][page] = ++latest_[page];
  Touch(BlockOfPage(page));
}

absl::StatusOr<uint32_t> CoherenceAudit::Send(int from, PageNumber page) const {
  uint32_t version = 0;
  if (from == kHost) {
    version = AtHost(page);
  } else {
    absl::StatusOr<uint32_t> copy = CopyAt(from, page);
    if (!copy.ok()) return copy.status();
    version = *copy;
  }
  if (version != Latest(page)) {
    return absl::InternalError(absl::StrFormat(
        "coherence: a fetch of page %#x is served version %d from %s; the newest is %d", page,
        version, Holder(from), Latest(page)));
  }
  return version;
}

void CoherenceAudit::Landed(int device, PageNumber page, uint32_t version) {
  copies_[device][page] = version;
  Touch(BlockOfPage(page));
}

void CoherenceAudit::Dropped(int device, PageNumber page) {
  copies_[device].erase(page);
  Touch(BlockOfPage(page));
}

void CoherenceAudit::LeavesForHost(int device, PageNumber page) {
  auto it = copies_[device].find(page);
  returning_[page] = it == copies_[device].end() ? 0 : it->second;
  if (it != copies_[device].end()) copies_[device].erase(it);
  Touch(BlockOfPage(page));
}

void CoherenceAudit::ReachedHost(PageNumber page) {
  auto it = returning_.find(page);
  if (it == returning_.end()) return;
  host_[page] = it->second;
  returning_.erase(it);
  Touch(BlockOfPage(page));
}

void CoherenceAudit::KernelBegins() { at_kernel_start_ = latest_; }

absl::Status CoherenceAudit::CheckBlock(BlockNumber block, bool busy) const {
  const BlockDescriptor* descriptor = directory_.Find(block);
  for (int index = 0; index < kPagesPerBlock; ++index) {
    const PageNumber page = FirstPageOfBlock(block) + index;
    const uint32_t latest = Latest(page);
    int writers = 0;
    bool held = AtHost(page) == latest;
    if (auto it = returning_.find(page); it != returning_.end() && it->second == latest)
      held = true;
    for (int device = 0; device < devices_; ++device) {
      const bool maps = mappings_.Maps(device, page);
      const bool writes = mappings_.MapsWritable(device, page);
      writers += writes;
      auto copy = copies_[device].find(page);
      if (maps != (copy != copies_[device].end())) {
        return absl::InternalError(absl::StrFormat(
            "coherence: device %d %s page %#x, but the audit %s a copy there", device,
            maps ? "maps" : "does not map", page, maps ? "knows no" : "still has"));
      }
      if (!maps) continue;
      if (copy->second < Lookup(at_kernel_start_, page)) {
        return absl::InternalError(absl::StrFormat(
            "coherence: device %d maps version %d of page %#x, older than the version %d the "
            "kernel began with",
            device, copy->second, page, Lookup(at_kernel_start_, page)));
      }
      held |= copy->second == latest;
      if (busy || descriptor == nullptr) continue;
      if (descriptor->read_masks[device].test(index) != maps ||
          descriptor->write_masks[device].test(index) != writes) {
        return absl::InternalError(absl::StrFormat(
            "coherence: block %d's masks say device %d maps page %d %s; it maps it %s", block,
            device, index,
            descriptor->write_masks[device].test(index)  ? "for writing"
            : descriptor->read_masks[device].test(index) ? "for reading"
                                                         : "not at all",
            writes ? "for writing"
            : maps ? "for reading"
                   : "not at all"));
      }
    }
    if (writers > 1) {
      return absl::InternalError(
          absl::StrFormat("coherence: %d devices map page %#x for writing", writers, page));
    }
    if (!held) {
      return absl::InternalError(
          absl::StrFormat("coherence: version %d of page %#x is held nowhere: lost", latest, page));
    }
    if (busy) continue;
    if (descriptor != nullptr && descriptor->host_current.test(index) && AtHost(page) != latest) {
      return absl::InternalError(absl::StrFormat(
          "coherence: the directory says the host holds page %#x's newest data; it holds "
          "version %d of %d",
          page, AtHost(page), latest));
    }
    const int holder = directory_.NewestCopyHolder(page);
    const uint32_t served = holder == kHost ? AtHost(page) : Lookup(copies_[holder], page);
    if (served != latest) {
      return absl::InternalError(absl::StrFormat(
          "coherence: a fault on page %#x would be served version %d from %s; the newest is %d",
          page, served, Holder(holder), latest));
    }
  }
  return absl::OkStatus();
}

absl::Status CoherenceAudit::CheckKernelBoundary() const {
  for (BlockNumber block : kernel_blocks_) {
    for (int index = 0; index < kPagesPerBlock; ++index) {
      const PageNumber page = FirstPageOfBlock(block) + index;
      int writer = -1;
      int mapped = 0;
      for (int device = 0; device < devices_; ++device) {
        if (!mappings_.Maps(device, page)) continue;
        ++mapped;
        if (mappings_.MapsWritable(device, page)) writer = device;
        auto copy = copies_[device].find(page);
        if (copy == copies_[device].end() || copy->second != Latest(page)) {
          return absl::InternalError(absl::StrFormat(
              "coherence: after the kernel, device %d maps a copy of page %#x older than "
              "version %d",
              device, page, Latest(page)));
        }
      }
      if (writer >= 0 && mapped > 1) {
        return absl::InternalError(absl::StrFormat(
            "coherence: after the kernel, page %#x is mapped by %d devices while device %d may "
            "write it",
            page, mapped, writer));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace umlab::snurhac
