// The transport's derived calls, the wire format readers, and the MPI transport over train::Comm.
#include "resil/ecrm/transport.hpp"

#include <cstring>

#include "resil/core/error.hpp"
#include "resil/train/comm.hpp"

namespace resil::ecrm {

namespace {
Inbox exchange_impl(const Transport& t, std::initializer_list<const std::vector<ByteVec>*> parts, bool framed,
                    const std::function<void()>& while_waiting) {
  const auto n = static_cast<std::size_t>(t.size());
  for (const auto* p : parts)
    if (p && p->size() != n) throw EcError("exchange: " + std::to_string(p->size()) + " buffers for " + std::to_string(n) + " ranks");
  const std::size_t frame = framed ? sizeof(std::uint64_t) : 0;
  std::vector<std::size_t> counts(n);
  for (std::size_t r = 0; r < n; ++r)
    for (const auto* p : parts) counts[r] += frame + (p ? (*p)[r].size() : 0);
  // Packed straight into the send buffer, while the counts travel.
  auto pack = [&](std::byte* w) {
    for (std::size_t r = 0; r < n; ++r)
      for (const auto* p : parts) {
        const std::uint64_t len = p ? (*p)[r].size() : 0;
        if (framed) {
          std::memcpy(w, &len, sizeof len);
          w += sizeof len;
        }
        if (len) std::memcpy(w, (*p)[r].data(), len);
        w += len;
      }
  };
  return t.alltoallv(counts, pack, while_waiting);
}

class CommTransport final : public Transport {
public:
  explicit CommTransport(const train::Comm& comm) : comm_(comm) {}
  int rank() const noexcept override { return comm_.rank(); }
  int size() const noexcept override { return comm_.size(); }
  Inbox alltoallv(const std::vector<std::size_t>& counts, const std::function<void(std::byte*)>& pack,
                  const std::function<void()>& while_waiting) const override {
    auto in = comm_.alltoallv(counts, pack, while_waiting);
    return Inbox(std::move(in.data), std::move(in.offsets));
  }
  void allreduce_sum_ordered(std::vector<float>& buf) const override { comm_.allreduce_sum(buf); }
  void allreduce_sum_ordered(std::vector<double>& buf) const override { comm_.allreduce_sum(buf); }
  void allreduce_max(std::vector<int>& buf) const override { comm_.allreduce_max(buf); }
  void bcast(ByteVec& buf, int root) const override { comm_.bcast_bytes(buf.data(), buf.size(), root); }
  void bcast(std::uint64_t& v, int root) const override { comm_.bcast(v, root); }
  std::vector<ByteVec> gather(const ByteVec& mine, int root) const override { return comm_.gather(mine, root); }
  void barrier() const override { comm_.barrier(); }

private:
  const train::Comm& comm_;
};
}  // namespace

Inbox Transport::exchange(const std::vector<ByteVec>& out, const std::function<void()>& while_waiting) const {
  return exchange_impl(*this, {&out}, false, while_waiting);
}

Inbox Transport::exchange_parts(std::initializer_list<const std::vector<ByteVec>*> parts) const {
  return exchange_impl(*this, parts, true, {});
}

int Transport::allreduce_max(int v) const {
  std::vector<int> b{v};
  allreduce_max(b);
  return b[0];
}

std::unique_ptr<Transport> make_comm_transport(const train::Comm& comm) { return std::make_unique<CommTransport>(comm); }

const std::byte* Reader::take(std::size_t n) {
  if (pos_ + n > b_.size()) throw EcError("malformed " + what_ + " message: " + std::to_string(b_.size()) + " bytes, wanted " + std::to_string(pos_ + n));
  const std::byte* p = b_.data() + pos_;
  pos_ += n;
  return p;
}

void Reader::copy_out(void* dst, std::size_t n) { std::memcpy(dst, take(n), n); }

}  // namespace resil::ecrm
