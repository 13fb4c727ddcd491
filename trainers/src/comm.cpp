#include "resil/train/comm.hpp"

#include <sched.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "resil/config.hpp"
#include "resil/core/error.hpp"

#if RESIL_HAVE_MPI
#include <mpi.h>
#include "resil/train/mpi_check.hpp"
#endif

namespace resil::train {

namespace {
#if RESIL_HAVE_MPI
bool mpi_active() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}
bool g_owner = false;

template <class T>
void ordered_sum(std::vector<T>& buf, MPI_Datatype type, int rank, int size, int poll_us) {
  // Reduce-scatter, then all-gather: rank q sums its segment of every rank's buffer in rank order
  // (buf_0 + buf_1 + ... + buf_{size-1}, each element the same additions in the same order as one
  // process summing the gathered buffers), then every rank collects the summed segments.
  const std::size_t n = buf.size(), P = static_cast<std::size_t>(size), me = static_cast<std::size_t>(rank);
  std::vector<int> len(P), at(P);
  for (std::size_t q = 0; q < P; ++q) {
    at[q] = static_cast<int>(n * q / P);
    len[q] = static_cast<int>(n * (q + 1) / P) - at[q];
  }
  const std::size_t mine = static_cast<std::size_t>(len[me]);
  // Every rank's copy of this rank's segment, kept between calls: a fresh buffer each step costs
  // its pages again (zeroed by the kernel, faulted in one by one).
  static thread_local std::vector<T> parts;
  parts.resize(mine * P);
  std::vector<int> rlen(P, len[me]), rat(P);
  for (std::size_t q = 0; q < P; ++q) rat[q] = static_cast<int>(q * mine);
  MPI_Request req;
  RESIL_MPI_CHECK(MPI_Ialltoallv(buf.data(), len.data(), at.data(), type, parts.data(), rlen.data(), rat.data(), type, MPI_COMM_WORLD, &req));
  resil::train::mpi_wait(req, poll_us);
  T* seg = buf.data() + at[me];
  std::copy_n(parts.data(), mine, seg);
  for (std::size_t q = 1; q < P; ++q) {
    const T* src = parts.data() + q * mine;
    for (std::size_t i = 0; i < mine; ++i) seg[i] += src[i];
  }
  RESIL_MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, type, buf.data(), len.data(), at.data(), type, MPI_COMM_WORLD, &req));
  resil::train::mpi_wait(req, poll_us);
}
#endif
}  // namespace

#if RESIL_HAVE_MPI
namespace {
// A process that no MPI launcher started is a world of one whether or not it calls MPI_Init, and
// MPICH's singleton init costs ~0.1 s and ~200 MB (UCX brings up its transports): one campaign
// trial run as a command paid it every time. The launchers' environments: MPICH Hydra and Slurm's
// PMI/PMI2 (PMI_*), PMIx (PMIX_RANK), Open MPI, Slurm's srun (SLURM_PROCID, also set in a batch
// script, where the init is merely unneeded), Cray PALS; RESIL_MPI=1 forces the init for others.
bool launched_by_mpi() {
  for (const char* v : {"PMI_RANK", "PMI_SIZE", "PMI_FD", "PMI_PORT", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "PALS_RANKID"})
    if (std::getenv(v)) return true;
  const char* force = std::getenv("RESIL_MPI");
  return force && std::string(force) == "1";
}
}  // namespace
#endif

MpiSession::MpiSession(int* argc, char*** argv) {
#if RESIL_HAVE_MPI
  int init = 0;
  MPI_Initialized(&init);
  if (!init && launched_by_mpi()) {
    RESIL_MPI_CHECK(MPI_Init(argc, argv));
    g_owner = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
#else
  (void)argc;
  (void)argv;
#endif
}

MpiSession::~MpiSession() {
#if RESIL_HAVE_MPI
  if (g_owner && mpi_active()) MPI_Finalize();
  g_owner = false;
#endif
}

Comm Comm::world() {
#if RESIL_HAVE_MPI
  if (mpi_active()) {
    int r = 0, s = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    return Comm(r, s);
  }
#endif
  return Comm(0, 1);
}

#if RESIL_HAVE_MPI
namespace {
// f(node) on the communicator of the ranks sharing this node (MPI_COMM_TYPE_SHARED), freed after.
template <class F>
auto with_node(int world_rank, F f) {
  MPI_Comm node = MPI_COMM_NULL;
  RESIL_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node));
  struct Free {
    MPI_Comm& c;
    ~Free() { MPI_Comm_free(&c); }
  } free_node{node};
  return f(node);
}

// This rank's rank in, or the size of, the ranks sharing its node.
int on_node(int world_rank, bool size) {
  return with_node(world_rank, [size](MPI_Comm node) {
    int v = size ? 1 : 0;
    if (size) MPI_Comm_size(node, &v);
    else MPI_Comm_rank(node, &v);
    return v;
  });
}
}  // namespace
#endif

int Comm::local_rank() const {
#if RESIL_HAVE_MPI
  if (size_ > 1) return on_node(rank_, false);
#endif
  return 0;
}

int Comm::local_size() const {
#if RESIL_HAVE_MPI
  if (size_ > 1) return on_node(rank_, true);
#endif
  return 1;
}

bool Comm::cpu_per_process() const {
#if RESIL_HAVE_MPI && defined(__linux__)
  if (size_ > 1) {
    // A rank that cannot read its mask adds no CPU (it still joins the collective).
    cpu_set_t mine;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_ZERO(&mine);
    return with_node(rank_, [&mine](MPI_Comm node) {
      cpu_set_t all;
      int n = 1;
      RESIL_MPI_CHECK(MPI_Allreduce(&mine, &all, static_cast<int>(sizeof mine), MPI_BYTE, MPI_BOR, node));
      MPI_Comm_size(node, &n);
      return n <= CPU_COUNT(&all);
    });
  }
#endif
  return true;
}

void Comm::set_poll_us(int us, int crowded) {
  poll_us_ = us != poll_auto ? us : cpu_per_process() ? poll_yield : crowded;
}

std::string poll_name(int us) {
  if (us == poll_auto) return "auto";
  if (us == poll_yield) return "yield";
  if (us == poll_backoff) return "backoff " + std::to_string(backoff_first_us) + "-" + std::to_string(backoff_cap_us) + " us";
  if (us == 0) return "spin";
  return "sleep " + std::to_string(us) + " us";
}

void Comm::allreduce_sum(std::vector<float>& buf) const {
#if RESIL_HAVE_MPI
  if (size_ > 1) ordered_sum(buf, MPI_FLOAT, rank_, size_, poll_us_);
#else
  (void)buf;
#endif
}

void Comm::allreduce_sum(std::vector<double>& buf) const {
#if RESIL_HAVE_MPI
  if (size_ > 1) ordered_sum(buf, MPI_DOUBLE, rank_, size_, poll_us_);
#else
  (void)buf;
#endif
}

int Comm::allreduce_max(int v) const {
#if RESIL_HAVE_MPI
  if (size_ > 1) {
    int out = v;
    MPI_Request req;
    RESIL_MPI_CHECK(MPI_Iallreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req));
    resil::train::mpi_wait(req, poll_us_);
    return out;
  }
#endif
  return v;
}

void Comm::bcast(std::vector<double>& buf, int root) const {
#if RESIL_HAVE_MPI
  if (size_ > 1) {
    MPI_Request req;
    RESIL_MPI_CHECK(MPI_Ibcast(buf.data(), static_cast<int>(buf.size()), MPI_DOUBLE, root, MPI_COMM_WORLD, &req));
    mpi_wait(req, poll_us_);
  }
#else
  (void)buf;
  (void)root;
#endif
}

void Comm::allreduce_max(std::vector<int>& buf) const {
#if RESIL_HAVE_MPI
  if (size_ > 1) {
    std::vector<int> out(buf.size());
    MPI_Request req;
    RESIL_MPI_CHECK(MPI_Iallreduce(buf.data(), out.data(), static_cast<int>(buf.size()), MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req));
    mpi_wait(req, poll_us_);
    buf = std::move(out);
  }
#else
  (void)buf;
#endif
}

void Comm::bcast(std::uint64_t& v, int root) const {
#if RESIL_HAVE_MPI
  if (size_ > 1) {
    MPI_Request req;
    RESIL_MPI_CHECK(MPI_Ibcast(&v, 1, MPI_UINT64_T, root, MPI_COMM_WORLD, &req));
    mpi_wait(req, poll_us_);
  }
#else
  (void)v;
  (void)root;
#endif
}

std::vector<std::vector<std::byte>> Comm::gather(const std::vector<std::byte>& mine, int root) const {
  std::vector<std::vector<std::byte>> out;
#if RESIL_HAVE_MPI
  if (size_ > 1) {
    const auto n = static_cast<std::size_t>(size_);
    if (mine.size() > static_cast<std::size_t>(INT_MAX)) throw MpiError("gather: " + std::to_string(mine.size()) + " bytes from one rank");
    int count = static_cast<int>(mine.size());
    std::vector<int> counts(n), disp(n);
    MPI_Request req;
    RESIL_MPI_CHECK(MPI_Igather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, root, MPI_COMM_WORLD, &req));
    mpi_wait(req, poll_us_);
    std::size_t tot = 0;
    for (std::size_t r = 0; r < n; ++r) {
      if (tot > static_cast<std::size_t>(INT_MAX)) throw MpiError("gather: " + std::to_string(tot) + " bytes in all");
      disp[r] = static_cast<int>(tot);
      tot += static_cast<std::size_t>(counts[r]);
    }
    std::vector<std::byte> all(rank_ == root ? tot : 0);
    RESIL_MPI_CHECK(MPI_Igatherv(mine.data(), count, MPI_BYTE, all.data(), counts.data(), disp.data(), MPI_BYTE, root,
                                 MPI_COMM_WORLD, &req));
    mpi_wait(req, poll_us_);
    if (rank_ == root)
      for (std::size_t r = 0; r < n; ++r) out.emplace_back(all.begin() + disp[r], all.begin() + disp[r] + counts[r]);
    return out;
  }
#endif
  (void)root;
  out.emplace_back(mine.begin(), mine.end());
  return out;
}

Comm::Received Comm::alltoallv(const std::vector<std::size_t>& send_counts, const std::function<void(std::byte*)>& pack,
                               const std::function<void()>& while_waiting) const {
  const auto n = static_cast<std::size_t>(size_);
  if (send_counts.size() != n) throw MpiError("alltoallv: " + std::to_string(send_counts.size()) + " counts for " + std::to_string(n) + " ranks");
  Received in;
  in.offsets.assign(n + 1, 0);
#if RESIL_HAVE_MPI
  if (size_ > 1) {
    std::vector<int> scount(n), rcount(n), sdisp(n), rdisp(n);
    std::size_t stot = 0;
    for (std::size_t r = 0; r < n; ++r) {
      if (send_counts[r] > static_cast<std::size_t>(1) << 30) throw MpiError("alltoallv: message of " + std::to_string(send_counts[r]) + " bytes");
      scount[r] = static_cast<int>(send_counts[r]);
      sdisp[r] = static_cast<int>(stot);
      stot += send_counts[r];
    }
    if (stot > static_cast<std::size_t>(INT_MAX)) throw MpiError("alltoallv: " + std::to_string(stot) + " bytes in all");
    MPI_Request req;
    RESIL_MPI_CHECK(MPI_Ialltoall(scount.data(), 1, MPI_INT, rcount.data(), 1, MPI_INT, MPI_COMM_WORLD, &req));
    // Packed while the counts travel; not zero-filled first (pack writes every byte).
    const std::unique_ptr<std::byte[]> sbuf(new std::byte[stot]);
    if (pack) pack(sbuf.get());
    else if (stot) std::memset(sbuf.get(), 0, stot);
    mpi_wait(req, poll_us_);
    std::size_t rtot = 0;
    for (std::size_t r = 0; r < n; ++r) {
      in.offsets[r] = rtot;
      rdisp[r] = static_cast<int>(rtot);
      rtot += static_cast<std::size_t>(rcount[r]);
    }
    in.offsets[n] = rtot;
    if (rtot > static_cast<std::size_t>(INT_MAX)) throw MpiError("alltoallv: " + std::to_string(rtot) + " bytes in all");
    in.data.resize(rtot);
    RESIL_MPI_CHECK(MPI_Ialltoallv(sbuf.get(), scount.data(), sdisp.data(), MPI_BYTE, in.data.data(), rcount.data(), rdisp.data(),
                                   MPI_BYTE, MPI_COMM_WORLD, &req));
    if (while_waiting) while_waiting();
    mpi_wait(req, poll_us_);
    return in;
  }
#endif
  // A world of one sends to itself.
  in.data.resize(send_counts[0]);
  if (pack) pack(in.data.data());
  in.offsets[1] = send_counts[0];
  if (while_waiting) while_waiting();
  return in;
}

void Comm::bcast_bytes(void* p, std::size_t n, int root) const {
#if RESIL_HAVE_MPI
  if (size_ > 1) {
    MPI_Request req;
    RESIL_MPI_CHECK(MPI_Ibcast(p, static_cast<int>(n), MPI_BYTE, root, MPI_COMM_WORLD, &req));
    mpi_wait(req, poll_us_);
  }
#else
  (void)p;
  (void)n;
  (void)root;
#endif
}

void Comm::send(const float* p, std::size_t n, int dest, int tag) const {
#if RESIL_HAVE_MPI
  MPI_Request req;
  RESIL_MPI_CHECK(MPI_Isend(p, static_cast<int>(n), MPI_FLOAT, dest, tag, MPI_COMM_WORLD, &req));
  mpi_wait(req, poll_us_);
#else
  (void)p; (void)n; (void)dest; (void)tag;
  throw MpiError("send: this build has no MPI");
#endif
}

void Comm::recv(float* p, std::size_t n, int src, int tag) const {
#if RESIL_HAVE_MPI
  MPI_Request req;
  RESIL_MPI_CHECK(MPI_Irecv(p, static_cast<int>(n), MPI_FLOAT, src, tag, MPI_COMM_WORLD, &req));
  mpi_wait(req, poll_us_);
#else
  (void)p; (void)n; (void)src; (void)tag;
  throw MpiError("recv: this build has no MPI");
#endif
}

void Comm::barrier() const {
#if RESIL_HAVE_MPI
  if (size_ > 1) {
    MPI_Request req;
    RESIL_MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
    mpi_wait(req, poll_us_);
  }
#endif
}

void Comm::abort(int code) const {
#if RESIL_HAVE_MPI
  if (size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

// ---------------------------------------------------------------- device collectives (NCCL)
namespace {
NcclProvider g_nccl;
}

void register_nccl_provider(const NcclProvider& p) { g_nccl = p; }

bool nccl_built() noexcept { return g_nccl.make != nullptr && g_nccl.device_count != nullptr; }

std::string resolve_reduce(const std::string& requested, const std::string& device, const Comm& comm) {
  if (requested == "host") return "host";
  if (requested != "auto" && requested != "nccl") throw UsageError("--reduce '" + requested + "' (expected auto, host or nccl)");
  const bool automatic = requested == "auto";
  if (device != "cuda") {
    if (automatic) return "host";
    throw UsageError("--reduce nccl needs --device cuda (this run is on " + device + "); use --reduce host");
  }
  if (!nccl_built()) {
    if (automatic) return "host";
    throw UsageError("--reduce nccl: this build of resil has no NCCL (RESIL_HAVE_NCCL=0); use --reduce host");
  }
  if (comm.size() > 1) {
    // NCCL refuses two ranks of one communicator on the same GPU ("Duplicate GPU detected"). Every
    // rank learns whether any node is oversubscribed, so all ranks take the same path.
    const int local = comm.local_size(), gpus = g_nccl.device_count();
    const int shared = comm.allreduce_max(local > gpus ? 1 : 0);
    if (shared) {
      if (automatic) return "host";
      throw UsageError("--reduce nccl: " + std::to_string(local) + " ranks on this node share " + std::to_string(gpus) +
                       " GPU(s), and NCCL needs one GPU per rank; use --reduce host (rank-ordered over MPI, GPUs may be shared)");
    }
  }
  return "nccl";
}

std::unique_ptr<DeviceComm> make_device_comm(Backend& be, const Comm& comm) {
  if (!nccl_built()) throw UsageError("--reduce nccl: this build of resil has no NCCL (RESIL_HAVE_NCCL=0); use --reduce host");
  return g_nccl.make(be, comm);
}

}  // namespace resil::train
