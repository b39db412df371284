// What a replica is told of the GPUs admission placed it on.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_ADMISSION_GPU_SET_H_
#define TORCHXD_ADMISSION_GPU_SET_H_

#include <vector>

#include "admission/gpu_topology.h"
#include "core/replica_request.h"

namespace torchxd::admission {

// The GPUs admission placed a replica on. A process gets
// CUDA_VISIBLE_DEVICES (indices, "" for none), CUDA_DEVICE_ORDER=PCI_BUS_ID
// (so indices mean what NVML and nvidia-smi number) and TORCHX_GPU_UUIDS; a
// container gets those devices in its DeviceRequest (the engine numbers them
// from 0 inside) and TORCHX_GPU_UUIDS.
void ApplyGpuSet(core::ReplicaRequest& request, const std::vector<int>& gpus, const GpuTopology& topology);

}  // namespace torchxd::admission

#endif  // TORCHXD_ADMISSION_GPU_SET_H_
