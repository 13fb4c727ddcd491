#include "mpi_comm.hpp"

#include <mpi.h>

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

std::vector<ByteVec> Mpi::exchange(const std::vector<ByteVec>& out) const {
  const auto n = static_cast<std::size_t>(size_);
  if (out.size() != n) throw EcError("exchange: " + std::to_string(out.size()) + " buffers for " + std::to_string(n) + " ranks");
  std::vector<int> scount(n), rcount(n), sdisp(n), rdisp(n);
  for (std::size_t r = 0; r < n; ++r) {
    if (out[r].size() > static_cast<std::size_t>(1) << 30) throw EcError("exchange: message of " + std::to_string(out[r].size()) + " bytes");
    scount[r] = static_cast<int>(out[r].size());
  }
  MPI_Request req;
  RESIL_MPI_CHECK(MPI_Ialltoall(scount.data(), 1, MPI_INT, rcount.data(), 1, MPI_INT, MPI_COMM_WORLD, &req));
  wait(&req);
  ByteVec sbuf, rbuf;
  int stot = 0, rtot = 0;
  for (std::size_t r = 0; r < n; ++r) {
    sdisp[r] = stot;
    rdisp[r] = rtot;
    stot += scount[r];
    rtot += rcount[r];
  }
  sbuf.resize(static_cast<std::size_t>(stot));
  rbuf.resize(static_cast<std::size_t>(rtot));
  for (std::size_t r = 0; r < n; ++r)
    if (!out[r].empty()) std::memcpy(sbuf.data() + sdisp[r], out[r].data(), out[r].size());
  RESIL_MPI_CHECK(MPI_Ialltoallv(sbuf.data(), scount.data(), sdisp.data(), MPI_BYTE, rbuf.data(), rcount.data(), rdisp.data(),
                                 MPI_BYTE, MPI_COMM_WORLD, &req));
  wait(&req);
  std::vector<ByteVec> in(n);
  for (std::size_t r = 0; r < n; ++r) in[r].assign(rbuf.begin() + rdisp[r], rbuf.begin() + rdisp[r] + rcount[r]);
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
