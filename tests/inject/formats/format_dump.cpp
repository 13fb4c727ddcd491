// Test driver: parse one file with the format parsers and print what they found as JSON, for
// formats_check.py to compare against what PyTorch and NumPy report. Usage:
//   format_dump torch|safetensors|npy|npz|zip FILE
// Bad input: one line "format_dump: error: <message>" and exit code 4 (corrupt input).
#include <fcntl.h>
#include <sys/stat.h>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "resil/core/error.hpp"
#include "resil/core/fd.hpp"
#include "resil/inject/formats/npy.hpp"
#include "resil/inject/formats/safetensors.hpp"
#include "resil/inject/formats/torch.hpp"
#include "resil/inject/formats/zip.hpp"

namespace f = resil::inject::formats;

namespace {

std::string q(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += std::string("\\") + c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += b;
    } else out += c;
  }
  return out + "\"";
}
template <class V>
std::string list(const V& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}
std::string entry(const f::ZipEntry& e) {
  std::ostringstream o;
  o << "{\"name\":" << q(e.name) << ",\"method\":" << static_cast<int>(e.method) << ",\"crc\":" << e.crc32
    << ",\"size\":" << e.uncompressed_size << ",\"csize\":" << e.compressed_size << ",\"data_offset\":" << e.data_offset
    << ",\"local_crc_offset\":" << e.local_crc_offset << ",\"central_crc_offset\":" << e.central_crc_offset
    << ",\"descriptor\":" << (e.data_descriptor ? "true" : "false") << "}";
  return o.str();
}
std::string npy(const f::NpyHeader& h) {
  std::ostringstream o;
  o << "{\"version\":" << h.major << ",\"dtype\":" << q(f::dtype_name(h.dtype)) << ",\"big_endian\":" << (h.big_endian ? "true" : "false")
    << ",\"fortran_order\":" << (h.fortran_order ? "true" : "false") << ",\"shape\":" << list(h.shape)
    << ",\"data_offset\":" << h.data_offset << ",\"data_size\":" << h.data_size << "}";
  return o.str();
}

std::string dump(std::string_view kind, f::Bytes b) {
  std::ostringstream o;
  if (kind == "zip") {
    const auto z = f::parse_zip(b);
    o << "{\"zip64\":" << (z.zip64 ? "true" : "false") << ",\"entries\":[";
    for (std::size_t i = 0; i < z.entries.size(); ++i) o << (i ? "," : "") << entry(z.entries[i]);
    o << "]}";
  } else if (kind == "torch") {
    const auto a = f::parse_torch(b);
    o << "{\"legacy\":" << (a.legacy ? "true" : "false") << ",\"prefix\":" << q(a.prefix) << ",\"tensors\":[";
    for (std::size_t i = 0; i < a.state.tensors.size(); ++i) {
      const auto& t = a.state.tensors[i];
      o << (i ? "," : "") << "{\"name\":" << q(t.name) << ",\"role\":" << q(f::role_name(t.role)) << ",\"key\":" << q(t.storage_key)
        << ",\"dtype\":" << q(f::dtype_name(t.dtype)) << ",\"offset\":" << t.storage_offset << ",\"shape\":" << list(t.shape)
        << ",\"stride\":" << list(t.stride) << ",\"requires_grad\":" << (t.requires_grad ? "true" : "false")
        << ",\"counter\":" << (t.counter ? "true" : "false") << "}";
    }
    o << "],\"storages\":[";
    for (std::size_t i = 0; i < a.state.storages.size(); ++i) {
      const auto& s = a.state.storages[i];
      o << (i ? "," : "") << "{\"key\":" << q(s.key) << ",\"dtype\":" << q(f::dtype_name(s.dtype)) << ",\"numel\":" << s.numel
        << ",\"location\":" << q(s.location) << ",\"data_offset\":" << a.storage_data[i].offset << ",\"size\":" << a.storage_data[i].size;
      if (!a.legacy) o << ",\"entry\":" << entry(a.zip.entries[a.storage_entries[i]]);
      o << "}";
    }
    o << "],\"opaque\":[";
    for (std::size_t i = 0; i < a.state.opaque.size(); ++i) {
      const auto& x = a.state.opaque[i];
      o << (i ? "," : "") << "{\"name\":" << q(x.name) << ",\"role\":" << q(f::role_name(x.role)) << ",\"type\":" << q(x.type) << "}";
    }
    o << "],\"scalars\":[";
    for (std::size_t i = 0; i < a.state.scalars.size(); ++i) {
      const auto& s = a.state.scalars[i];
      o << (i ? "," : "") << "{\"name\":" << q(s.name) << ",\"role\":" << q(f::role_name(s.role)) << ",\"value\":";
      if (s.is_integer) o << s.integer;
      else o << q(std::to_string(s.real));
      o << "}";
    }
    o << "]}";
  } else if (kind == "safetensors") {
    const auto st = f::parse_safetensors(b);
    o << "{\"header_size\":" << st.header_size << ",\"tensors\":[";
    for (std::size_t i = 0; i < st.tensors.size(); ++i) {
      const auto& t = st.tensors[i];
      o << (i ? "," : "") << "{\"name\":" << q(t.name) << ",\"dtype\":" << q(f::dtype_name(t.dtype)) << ",\"shape\":" << list(t.shape)
        << ",\"offset\":" << t.offset << ",\"size\":" << t.size << "}";
    }
    o << "],\"metadata\":{";
    for (std::size_t i = 0; i < st.metadata.size(); ++i) o << (i ? "," : "") << q(st.metadata[i].first) << ":" << q(st.metadata[i].second);
    o << "}}";
  } else if (kind == "npy") {
    o << npy(f::parse_npy(b));
  } else if (kind == "npz") {
    const auto z = f::parse_npz(b);
    o << "{\"members\":[";
    for (std::size_t i = 0; i < z.members.size(); ++i) {
      const auto& m = z.members[i];
      o << (i ? "," : "") << "{\"name\":" << q(m.name) << ",\"file_offset\":" << m.file_offset << ",\"header\":" << npy(m.header)
        << ",\"entry\":" << entry(z.zip.entries[m.entry]) << "}";
    }
    o << "]}";
  } else {
    throw resil::UsageError("unknown kind '" + std::string(kind) + "'");
  }
  return o.str();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc != 3) throw resil::UsageError("usage: format_dump torch|safetensors|npy|npz|zip FILE");
    resil::Fd fd(::open(argv[2], O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0) throw resil::IoError(std::string("cannot open ") + argv[2]);
    const auto size = static_cast<std::size_t>(st.st_size);
    const resil::Mapping m = resil::Mapping::map(fd.get(), size, PROT_READ, MAP_PRIVATE);
    if (size && !m) throw resil::IoError(std::string("cannot map ") + argv[2]);
    std::cout << dump(argv[1], f::bytes_of(m.data(), size)) << "\n";
    return 0;
  } catch (const resil::Error& e) {
    std::cerr << "format_dump: error: " << argv[argc - 1] << ": " << e.what() << "\n";
    return resil::exit_code_of(e);
  }
}
