// The failures a run emulates (--fail: a rank loses its memory, in process) or causes (--kill: a
// real SIGKILL, the job relaunched), and which of them have happened. Each fires once, also across
// relaunches: the kills' mask travels in the state segment, and a relaunch after step G counts
// every --fail up to G as past. Kept apart from the engine as a failure injector is kept apart
// from the protocol it tests.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "resil/ecrm/config.hpp"

namespace resil::ecrm {

class FailureSchedule {
public:
  FailureSchedule(std::vector<FailSpec> fail, std::vector<KillSpec> kill)
      : fail_(std::move(fail)), kill_(std::move(kill)), fired_(fail_.size(), false) {}

  /// Every --fail at or before `step` counts as having happened (a start or relaunch after it).
  void skip_through(std::int64_t step) {
    for (std::size_t i = 0; i < fail_.size(); ++i) fired_[i] = fail_[i].step <= step;
  }
  /// The ranks whose --fail is at `step` and has not fired yet; they are marked fired.
  std::vector<int> fail_at(std::int64_t step) {
    std::vector<int> ranks;
    for (std::size_t i = 0; i < fail_.size(); ++i)
      if (!fired_[i] && fail_[i].step == step) {
        fired_[i] = true;
        ranks.push_back(fail_[i].rank);
      }
    return ranks;
  }
  /// The --kill specs at `step` that have not fired, as a mask over kills() (at most 64: parse_kills).
  std::uint64_t kills_due(std::int64_t step) const {
    std::uint64_t due = 0;
    for (std::size_t i = 0; i < kill_.size(); ++i)
      if (kill_[i].step == step && !kill_[i].in_repair && !(kills_fired_ >> i & 1u)) due |= std::uint64_t{1} << i;
    return due;
  }
  /// The --kill R@S:scrub spec of `rank` at `step` that has not fired (its index), if any.
  std::optional<std::size_t> kill_in_repair(std::int64_t step, int rank) const {
    for (std::size_t i = 0; i < kill_.size(); ++i)
      if (kill_[i].step == step && kill_[i].in_repair && kill_[i].rank == rank && !(kills_fired_ >> i & 1u)) return i;
    return std::nullopt;
  }
  const std::vector<KillSpec>& kills() const noexcept { return kill_; }
  std::uint64_t kills_fired() const noexcept { return kills_fired_; }
  void set_kills_fired(std::uint64_t mask) noexcept { kills_fired_ = mask; }

private:
  std::vector<FailSpec> fail_;
  std::vector<KillSpec> kill_;
  std::vector<bool> fired_;        // per fail_ entry
  std::uint64_t kills_fired_ = 0;  // bit i: kill_[i] has fired
};

}  // namespace resil::ecrm
