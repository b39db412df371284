#include "gpus/gpu_sample.h"

namespace torchxd::gpus {

std::string XidMeaning(uint64_t xid) {
  switch (xid) {
    case 13: return "graphics engine exception";
    case 31: return "GPU memory page fault";
    case 43: return "GPU stopped processing";
    case 45: return "preemptive cleanup";
    case 48: return "double-bit ECC error";
    case 61: return "internal micro-controller breakpoint";
    case 62: return "internal micro-controller halt";
    case 63: return "ECC page retirement or row remapping recording event";
    case 64: return "ECC page retirement or row remapper recording failure";
    case 74: return "NVLink error";
    case 79: return "fell off the bus";
    case 92: return "high single-bit ECC error rate";
    case 94: return "contained ECC error";
    case 95: return "uncontained ECC error";
    default: return "";
  }
}

bool XidLosesGpu(uint64_t xid) {
  switch (xid) {
    case 48:
    case 63:
    case 64:
    case 74:
    case 79:
    case 95:
      return true;
    default:
      return false;
  }
}

}  // namespace torchxd::gpus
