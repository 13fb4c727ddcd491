#include "mpi_comm.hpp"

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <cstring>

#include "resil/core/error.hpp"
#include "resil/train/mpi_check.hpp"

namespace resil::ectrain {

Mpi::Mpi(int poll_us) : poll_us_(poll_us) {
  RESIL_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  RESIL_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
}

void Mpi::wait(void* request) const { train::mpi_wait(*static_cast<MPI_Request*>(request), poll_us_); }

Inbox Mpi::exchange(const std::vector<ByteVec>& out, const std::function<void()>& while_waiting) const {
  return exchange_impl({&out}, false, while_waiting);
}

Inbox Mpi::exchange_parts(std::initializer_list<const std::vector<ByteVec>*> parts) const { return exchange_impl(parts, true, {}); }

Inbox Mpi::exchange_impl(std::initializer_list<const std::vector<ByteVec>*> parts, bool framed,
                         const std::function<void()>& while_waiting) const {
  const auto n = static_cast<std::size_t>(size_);
  for (const auto* p : parts)
    if (p && p->size() != n) throw EcError("exchange: " + std::to_string(p->size()) + " buffers for " + std::to_string(n) + " ranks");
  const std::size_t frame = framed ? sizeof(std::uint64_t) : 0;
  std::vector<int> scount(n), rcount(n), sdisp(n), rdisp(n);
  std::size_t stot = 0;
  for (std::size_t r = 0; r < n; ++r) {
    std::size_t len = 0;
    for (const auto* p : parts) len += frame + (p ? (*p)[r].size() : 0);
    if (len > static_cast<std::size_t>(1) << 30) throw EcError("exchange: message of " + std::to_string(len) + " bytes");
    scount[r] = static_cast<int>(len);
    sdisp[r] = static_cast<int>(stot);
    stot += len;
  }
  if (stot > static_cast<std::size_t>(INT_MAX)) throw EcError("exchange: " + std::to_string(stot) + " bytes in all");
  MPI_Request req;
  RESIL_MPI_CHECK(MPI_Ialltoall(scount.data(), 1, MPI_INT, rcount.data(), 1, MPI_INT, MPI_COMM_WORLD, &req));
  // Pack while the counts travel.
  ByteVec sbuf(stot);
  std::byte* w = sbuf.data();
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
  wait(&req);
  Inbox in;
  in.at_.resize(n + 1);
  std::size_t rtot = 0;
  for (std::size_t r = 0; r < n; ++r) {
    in.at_[r] = rtot;
    rdisp[r] = static_cast<int>(rtot);
    rtot += static_cast<std::size_t>(rcount[r]);
  }
  in.at_[n] = rtot;
  if (rtot > static_cast<std::size_t>(INT_MAX)) throw EcError("exchange: " + std::to_string(rtot) + " bytes in all");
  in.data_.resize(rtot);
  RESIL_MPI_CHECK(MPI_Ialltoallv(sbuf.data(), scount.data(), sdisp.data(), MPI_BYTE, in.data_.data(), rcount.data(), rdisp.data(),
                                 MPI_BYTE, MPI_COMM_WORLD, &req));
  if (while_waiting) while_waiting();
  wait(&req);
  return in;
}

void Mpi::allreduce_sum_ordered(std::vector<float>& buf) const {
  if (size_ == 1) return;
  const int n = static_cast<int>(buf.size());
  std::vector<float> all(rank_ == 0 ? buf.size() * static_cast<std::size_t>(size_) : 0);
  MPI_Request req;
  RESIL_MPI_CHECK(MPI_Igather(buf.data(), n, MPI_FLOAT, all.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD, &req));
  wait(&req);
  if (rank_ == 0)
    for (int r = 1; r < size_; ++r) {
      const float* src = all.data() + static_cast<std::size_t>(r) * buf.size();
      for (std::size_t i = 0; i < buf.size(); ++i) buf[i] += src[i];
    }
  RESIL_MPI_CHECK(MPI_Ibcast(buf.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD, &req));
  wait(&req);
}

void Mpi::allreduce_sum_ordered(std::vector<double>& buf) const {
  if (size_ == 1) return;
  const int n = static_cast<int>(buf.size());
  std::vector<double> all(rank_ == 0 ? buf.size() * static_cast<std::size_t>(size_) : 0);
  MPI_Request req;
  RESIL_MPI_CHECK(MPI_Igather(buf.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req));
  wait(&req);
  if (rank_ == 0)
    for (int r = 1; r < size_; ++r) {
      const double* src = all.data() + static_cast<std::size_t>(r) * buf.size();
      for (std::size_t i = 0; i < buf.size(); ++i) buf[i] += src[i];
    }
  RESIL_MPI_CHECK(MPI_Ibcast(buf.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req));
  wait(&req);
}

void Mpi::allreduce_max(std::vector<int>& buf) const {
  if (size_ == 1) return;
  std::vector<int> out(buf.size());
  MPI_Request req;
  RESIL_MPI_CHECK(MPI_Iallreduce(buf.data(), out.data(), static_cast<int>(buf.size()), MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req));
  wait(&req);
  buf = std::move(out);
}

int Mpi::allreduce_max(int v) const {
  std::vector<int> b{v};
  allreduce_max(b);
  return b[0];
}

void Mpi::bcast(ByteVec& buf, int root) const {
  if (size_ == 1) return;
  MPI_Request req;
  RESIL_MPI_CHECK(MPI_Ibcast(buf.data(), static_cast<int>(buf.size()), MPI_BYTE, root, MPI_COMM_WORLD, &req));
  wait(&req);
}

void Mpi::bcast(std::uint64_t& v, int root) const {
  if (size_ == 1) return;
  MPI_Request req;
  RESIL_MPI_CHECK(MPI_Ibcast(&v, 1, MPI_UINT64_T, root, MPI_COMM_WORLD, &req));
  wait(&req);
}

std::vector<ByteVec> Mpi::gather(const ByteVec& mine, int root) const {
  const auto n = static_cast<std::size_t>(size_);
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(n), disp(n);
  MPI_Request req;
  RESIL_MPI_CHECK(MPI_Igather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, root, MPI_COMM_WORLD, &req));
  wait(&req);
  int tot = 0;
  for (std::size_t r = 0; r < n; ++r) {
    disp[r] = tot;
    tot += counts[r];
  }
  ByteVec all(rank_ == root ? static_cast<std::size_t>(tot) : 0);
  RESIL_MPI_CHECK(MPI_Igatherv(mine.data(), count, MPI_BYTE, all.data(), counts.data(), disp.data(), MPI_BYTE, root,
                               MPI_COMM_WORLD, &req));
  wait(&req);
  std::vector<ByteVec> out;
  if (rank_ == root)
    for (std::size_t r = 0; r < n; ++r) out.emplace_back(all.begin() + disp[r], all.begin() + disp[r] + counts[r]);
  return out;
}

void Mpi::barrier() const {
  if (size_ == 1) return;
  MPI_Request req;
  RESIL_MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
  wait(&req);
}

void Mpi::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

const std::byte* Reader::take(std::size_t n) {
  if (pos_ + n > b_.size()) throw EcError("malformed " + what_ + " message: " + std::to_string(b_.size()) + " bytes, wanted " + std::to_string(pos_ + n));
  const std::byte* p = b_.data() + pos_;
  pos_ += n;
  return p;
}

void Reader::copy_out(void* dst, std::size_t n) { std::memcpy(dst, take(n), n); }

}  // namespace resil::ectrain
