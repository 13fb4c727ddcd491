// The adapters built on ExtentStorage, opened by open_storage (storage.cpp): one file each
// (safetensors_storage.cpp, numpy_storage.cpp, torch_storage.cpp). docs/reference/ckpt-flip.md,
// "Fault space per format", gives each one's fault space and limits.
#pragma once

#include <memory>
#include <string>

#include "resil/inject/storage.hpp"

namespace resil::inject {

std::unique_ptr<Storage> open_safetensors(const std::string& path, Access access);
std::unique_ptr<Storage> open_npy(const std::string& path, Access access);
std::unique_ptr<Storage> open_npz(const std::string& path, Access access);
std::unique_ptr<Storage> open_torch(const std::string& path, Access access);
/// A Hugging Face sharded set (set_storage.cpp), by its index file or directory (file_set.hpp).
std::unique_ptr<Storage> open_shards(const std::string& path, Access access);
/// A torch.distributed.checkpoint directory (dcp_storage.cpp).
std::unique_ptr<Storage> open_dcp(const std::string& path, Access access);

}  // namespace resil::inject
