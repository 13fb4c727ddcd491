// inject::select -> inject::sample_sites -> inject::plan -> inject::apply: the library steps a CLI
// run or a campaign trial takes, one header each (select.hpp, sampling.hpp, plan.hpp, apply.hpp);
// what decides a plan: PlanOptions (plan_options.hpp).
// plan: the drawn sites -> flip records, reading the touched words once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "resil/ckpt/io.hpp"
#include "resil/inject/flip_log.hpp"
#include "resil/inject/plan_options.hpp"
#include "resil/inject/sampling.hpp"
#include "resil/inject/select.hpp"
#include "resil/inject/storage.hpp"

namespace resil::inject {

/// Sites -> flip records: reads the touched words of `file` (read-only, opened through its format's
/// adapter) and applies the fault model in site order. Records hitting one word chain (old of the
/// second = new of the first).
std::vector<FlipRecord> plan(const std::string& file, std::span<const Target> targets, std::span<const Site> sites,
                             const PlanOptions& opt, Format format = Format::automatic);
/// The same through an open Storage (e.g. Access::in_place, then passed on to apply(): one open,
/// one mapping and one chunk-address lookup for both steps; each touched page faults in once). Only
/// reads: nothing is written, whatever the access.
std::vector<FlipRecord> plan(Storage& file, std::span<const Target> targets, std::span<const Site> sites,
                             const PlanOptions& opt);

/// Flat index -> N-d index (C order).
std::vector<std::uint64_t> unravel_index(std::uint64_t flat, const ckpt::Shape& shape);

}  // namespace resil::inject
