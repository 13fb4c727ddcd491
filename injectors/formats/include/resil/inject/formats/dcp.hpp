// The `.metadata` file of a torch.distributed.checkpoint (DCP) directory, read with the
// never-executing pickle reader (pickle.hpp): a pickled `torch.distributed.checkpoint.metadata.Metadata`
// whose state holds `state_dict_metadata` (each key's TensorStorageMetadata: dtype in its
// TensorProperties, global `size`, and `chunks`, each a ChunkStorageMetadata of `offsets` and `sizes`
// in the global tensor; or BytesStorageMetadata for a non-tensor value) and `storage_data` (each
// chunk's MetadataIndex(fqn, offset) -> `torch.distributed.checkpoint.filesystem._StorageInfo`:
// `relative_path` of its data file, `offset` and `length` of its bytes there, and from PyTorch 2.8
// `transform_descriptors` when a storage extension such as compression transformed them).
// Checked: every chunk lies in its tensor and has its storage entry; each data file is a plain name
// in the checkpoint's directory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "resil/inject/formats/bytes.hpp"
#include "resil/inject/formats/dtype.hpp"

namespace resil::inject::formats {

struct DcpChunk {
  std::vector<std::uint64_t> offsets, sizes;  // in the global tensor, one per dimension
  std::string file;                           // _StorageInfo.relative_path
  std::uint64_t offset = 0, length = 0;       // the chunk's stored bytes in `file`
  std::vector<std::string> transforms;        // transform_descriptors (empty: the bytes are as written)
};

struct DcpTensor {
  std::string name;  // the state_dict key (fqn): "model.layers.0.attention.wq.weight"
  DType dtype = DType::f32;
  std::vector<std::uint64_t> size;  // global shape
  std::vector<DcpChunk> chunks;     // in metadata order
};

struct DcpValue {  // a key stored as bytes (BytesStorageMetadata: a torch.save of a non-tensor value)
  std::string name;
  std::string file;                      // _StorageInfo.relative_path ("" when storage_data has no entry)
  std::uint64_t offset = 0, length = 0;  // its stored bytes in `file`
  std::vector<std::string> transforms;   // transform_descriptors
};

struct DcpMetadata {
  std::vector<DcpTensor> tensors;     // in state_dict_metadata order
  std::vector<DcpValue> values;       // in state_dict_metadata order
  std::vector<std::string> files;     // every data file a chunk names, sorted, each once
  std::string version;                // Metadata.version ("" before PyTorch 2.6)
};

/// Parse a whole `.metadata` file. Errors: CorruptInputError "dcp metadata: <what> at offset N".
DcpMetadata parse_dcp_metadata(Bytes file);

}  // namespace resil::inject::formats
