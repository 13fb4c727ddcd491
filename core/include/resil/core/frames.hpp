// Length-prefixed messages over a local stream socket: the protocol between a campaign and its
// trial workers (`ckpt-train serve`, docs/design/campaigns.md). A frame is a 4-byte little-endian length
// and that many bytes; a list of strings is a count and a length-prefixed string each.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace resil::frames {

/// Largest frame either side accepts (an argv, a result): anything longer is a broken peer.
inline constexpr std::uint32_t max_frame = 16u << 20;

/// Write one frame; false when the peer is gone (no SIGPIPE: MSG_NOSIGNAL).
inline bool write_frame(int fd, std::string_view payload) {
  if (payload.size() > max_frame) return false;
  std::string buf(4, '\0');
  const auto n = static_cast<std::uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) buf[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  buf.append(payload);
  std::size_t done = 0;
  while (done < buf.size()) {
    const ssize_t w = ::send(fd, buf.data() + done, buf.size() - done, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<std::size_t>(w);
  }
  return true;
}

/// Read exactly n bytes; false at end of stream or on an error.
inline bool read_exact(int fd, char* p, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t r = ::read(fd, p + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    done += static_cast<std::size_t>(r);
  }
  return true;
}

/// One frame; nothing when the peer closed the stream, failed, or sent a frame over max_frame.
inline std::optional<std::string> read_frame(int fd) {
  unsigned char len[4];
  if (!read_exact(fd, reinterpret_cast<char*>(len), 4)) return std::nullopt;
  const std::uint32_t n = std::uint32_t{len[0]} | (std::uint32_t{len[1]} << 8) | (std::uint32_t{len[2]} << 16) | (std::uint32_t{len[3]} << 24);
  if (n > max_frame) return std::nullopt;
  std::string s(n, '\0');
  if (!read_exact(fd, s.data(), n)) return std::nullopt;
  return s;
}

inline void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
/// A u32 at `pos` (advanced); nothing when the text is too short.
inline std::optional<std::uint32_t> get_u32(std::string_view in, std::size_t& pos) {
  if (in.size() < pos + 4) return std::nullopt;
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t{static_cast<unsigned char>(in[pos + static_cast<std::size_t>(i)])} << (8 * i);
  pos += 4;
  return v;
}

inline std::string encode_strings(const std::vector<std::string>& v) {
  std::string out;
  put_u32(out, static_cast<std::uint32_t>(v.size()));
  for (const auto& s : v) {
    put_u32(out, static_cast<std::uint32_t>(s.size()));
    out += s;
  }
  return out;
}
/// The strings of encode_strings; nothing when the bytes do not parse exactly.
inline std::optional<std::vector<std::string>> decode_strings(std::string_view in) {
  std::size_t pos = 0;
  const auto n = get_u32(in, pos);
  if (!n || *n > in.size()) return std::nullopt;
  std::vector<std::string> v;
  for (std::uint32_t i = 0; i < *n; ++i) {
    const auto len = get_u32(in, pos);
    if (!len || in.size() - pos < *len) return std::nullopt;
    v.emplace_back(in.substr(pos, *len));
    pos += *len;
  }
  if (pos != in.size()) return std::nullopt;
  return v;
}

}  // namespace resil::frames
