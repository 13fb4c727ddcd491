// NCCL device collectives under mpiexec with 2 ranks (label gpu; exit 77 = skipped).
//
//   gpu_nccl shared       ranks share one GPU: --reduce nccl is refused with a clear UsageError and
//                         auto falls back to host (skipped when there is no GPU, or one GPU per rank)
//   gpu_nccl collectives  one GPU per rank: allreduce of exactly representable values, NCCL vs the
//                         host rank-ordered sum bit for bit (2 ranks: both compute x0 + x1), repeated
//                         allreduce bit-identical, send/recv exact (skipped unless one GPU per rank)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"
#include "resil/train/comm.hpp"
#include "resil/train/cuda.hpp"

using namespace resil::train;

namespace {

int failures = 0;
void check(bool ok, const std::string& what, const Comm& comm) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "rank %d: FAIL: %s\n", comm.rank(), what.c_str());
  }
}

std::vector<float> download(Backend& be, const float* p, std::size_t n) {
  std::vector<float> h(n);
  be.download(h.data(), p, n);
  return h;
}

int shared(const Comm& comm) {
  try {
    resolve_reduce("nccl", "cuda", comm);
    check(false, "--reduce nccl accepted with ranks sharing a GPU", comm);
  } catch (const resil::UsageError& e) {
    check(std::string(e.what()).find("NCCL needs one GPU per rank") != std::string::npos, std::string("message: ") + e.what(), comm);
  }
  check(resolve_reduce("auto", "cuda", comm) == "host", "auto with a shared GPU is not host", comm);
  check(resolve_reduce("auto", "cpu", comm) == "host", "auto on cpu is not host", comm);
  return failures ? 1 : 0;
}

int collectives(const Comm& comm) {
  auto be = make_cuda_backend(cuda_device_for_local_rank(comm.local_rank()));
  auto nc = make_nccl_comm(*be, comm);
  if (comm.rank() == 0) std::printf("%s\n", nc->name().c_str());
  const int r = comm.rank();

  // Exactly representable values: the sum is exact whatever the order.
  const std::vector<std::size_t> sizes = {1, 0, 1000, 123457};
  std::vector<float*> bufs;
  std::vector<DeviceSpan> spans;
  for (std::size_t n : sizes) {
    std::vector<float> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = static_cast<float>((r + 1) * static_cast<int>(i % 4096));
    float* d = be->alloc(n);
    if (n) be->upload(d, h.data(), n);
    bufs.push_back(d);
    spans.push_back({d, n});
  }
  nc->allreduce_sum(spans);
  for (std::size_t b = 0; b < sizes.size(); ++b) {
    const auto h = download(*be, bufs[b], sizes[b]);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < h.size(); ++i) bad += h[i] != static_cast<float>(3 * static_cast<int>(i % 4096));
    check(bad == 0, std::to_string(bad) + " wrong sums in a buffer of " + std::to_string(sizes[b]), comm);
  }

  // Random values: NCCL equals the host path's rank-ordered sum, and repeats bit for bit.
  const std::size_t n = 300001;
  std::vector<float> x(n);
  resil::Rng rng(5, static_cast<std::uint64_t>(r));
  for (auto& v : x) v = static_cast<float>(rng.normal());
  std::vector<float> host = x;
  comm.allreduce_sum(host);
  float* d = be->alloc(n);
  std::vector<float> first;
  for (int rep = 0; rep < 2; ++rep) {
    be->upload(d, x.data(), n);
    nc->allreduce_sum({{d, n}});
    const auto got = download(*be, d, n);
    if (rep == 0) {
      first = got;
      check(std::memcmp(got.data(), host.data(), n * sizeof(float)) == 0, "NCCL sum differs from the host rank-ordered sum", comm);
    } else {
      check(std::memcmp(got.data(), first.data(), n * sizeof(float)) == 0, "repeated NCCL allreduce differs", comm);
    }
  }

  // Send/recv: rank 0 -> 1, rank 1 doubles and sends back (exact).
  const std::size_t m = 70001;
  float* p = be->alloc(m);
  if (r == 0) {
    be->upload(p, x.data(), m);
    nc->send(p, m, 1);
    nc->recv(p, m, 1);
    const auto back = download(*be, p, m);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < m; ++i) bad += back[i] != 2.0f * x[i];
    check(bad == 0, std::to_string(bad) + " wrong values after send/recv", comm);
  } else if (r == 1) {
    nc->recv(p, m, 0);
    be->axpy(m, 1.0f, p, p);
    nc->send(p, m, 0);
    be->download(x.data(), p, 1);  // waits for the stream
  }
  for (float* q : bufs) be->release(q);
  be->release(d);
  be->release(p);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  const Comm comm = Comm::world();
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    register_nccl_provider({&make_nccl_comm, &cuda_device_count});
    const int gpus = cuda_device_count();
    const int local = comm.local_size();
    // Every rank takes the same branch: the counts are agreed on.
    const int no_gpu = comm.allreduce_max(gpus == 0 ? 1 : 0);
    const int oversubscribed = comm.allreduce_max(local > gpus ? 1 : 0);
    if (no_gpu) {
      if (comm.rank() == 0) std::printf("skipped: %s\n", cuda_device_description(0).c_str());
      return 77;
    }
    if (comm.size() != 2) {
      std::fprintf(stderr, "gpu_nccl: run with 2 ranks (got %d)\n", comm.size());
      return 2;
    }
    int rc = 0;
    if (mode == "shared") {
      if (!oversubscribed) {
        if (comm.rank() == 0) std::printf("skipped: each rank has its own GPU (%d GPUs)\n", gpus);
        return 77;
      }
      rc = shared(comm);
    } else if (mode == "collectives") {
      if (oversubscribed) {
        if (comm.rank() == 0) std::printf("skipped: %d ranks share %d GPU(s); NCCL needs one GPU per rank\n", local, gpus);
        return 77;
      }
      rc = collectives(comm);
    } else {
      std::fprintf(stderr, "usage: gpu_nccl shared|collectives\n");
      return 2;
    }
    rc = comm.allreduce_max(rc);
    if (comm.rank() == 0) std::printf("gpu_nccl %s: %s\n", mode.c_str(), rc ? "FAILED" : "OK");
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_nccl: rank %d: %s\n", comm.rank(), e.what());
    comm.abort(1);
  }
}
