// The per-rank error policy of a multi-process job, shared by ckpt-train (train::Comm) and
// ec-train (ecrm::Transport): a phase whose errors may be local to some ranks (reading one's own
// shard, writing a file, running out of memory) runs inside agree(), so that no rank is left
// waiting in a collective when another failed and the job ends with one exit code, reported once
// per cause, without MPI_Abort.
#pragma once

#include <concepts>
#include <exception>
#include <filesystem>
#include <new>
#include <string>

#include "resil/core/error.hpp"

namespace resil::train {

/// A failure the ranks of a job agreed on (every rank throws one, with the same exit code, so no
/// rank waits in a collective). `report()` says whether this rank prints it: rank 0 when every rank
/// failed (once for the job), otherwise each rank that failed itself (its message starts with
/// "rank N: "); a rank that only heard of another's failure stays silent.
class PeerError : public Error {
public:
  PeerError(const std::string& what, ExitCode code, bool report = false) : Error(what), code_(code), report_(report) {}
  ExitCode exit_code() const noexcept override { return code_; }
  bool report() const noexcept { return report_; }

private:
  ExitCode code_;
  bool report_;
};

/// The ranks' side of agree(): train::Comm and ecrm::Transport both are one.
template <class G>
concept RankGroup = requires(const G& g, int v) {
  { g.rank() } -> std::convertible_to<int>;
  { g.size() } -> std::convertible_to<int>;
  { g.allreduce_max(v) } -> std::convertible_to<int>;
};

/// Run `fn` on every rank and agree on failure. One process: the error itself. Several: every
/// rank throws a PeerError with the job's exit code (the highest of the failing ranks'); it is
/// reported once by rank 0 when every rank failed (the same check on the same input), otherwise by
/// each failing rank, prefixed with its rank (its own shard, file or memory: "rank 0: ..." too);
/// ranks that did not fail stay silent. `for_job`: a check rank 0 makes for the whole job (its
/// outputs): reported like one every rank failed. Errors that are not resil::Error become one:
/// filesystem errors IoError, out of memory and anything else internal.
template <RankGroup G, class Fn>
void agree(const G& group, Fn&& fn, bool for_job = false) {
  int code = 0;
  std::exception_ptr err;
  std::string what;
  try {
    fn();
  } catch (const Error& e) {
    code = static_cast<int>(e.exit_code());
    err = std::current_exception();
    what = e.what();
  } catch (const std::filesystem::filesystem_error& e) {
    code = static_cast<int>(ExitCode::io);
    err = std::make_exception_ptr(IoError(e.what()));
    what = e.what();
  } catch (const std::bad_alloc&) {
    code = static_cast<int>(ExitCode::internal);
    err = std::current_exception();
    what = "out of memory";
  } catch (const std::exception& e) {
    code = static_cast<int>(ExitCode::internal);
    err = std::current_exception();
    what = e.what();
  }
  if (group.size() == 1) {
    if (err) std::rethrow_exception(err);
    return;
  }
  const int any = group.allreduce_max(code);
  if (any == 0) return;
  const bool every = group.allreduce_max(err ? 0 : 1) == 0;
  const int last = group.allreduce_max(err ? group.rank() : -1);
  const auto job_code = static_cast<ExitCode>(any);
  if (!err) throw PeerError("rank " + std::to_string(last) + " failed (it reported why)", job_code);
  if (every || for_job) throw PeerError(what, job_code, group.rank() == 0);
  throw PeerError("rank " + std::to_string(group.rank()) + ": " + what, job_code, true);
}

}  // namespace resil::train
