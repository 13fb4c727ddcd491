#include <iostream>
#include <optional>
#include <set>

#include "commands.hpp"
#include "resil/app/choice.hpp"
#include "resil/app/validators.hpp"
#include "resil/app/main.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/config.hpp"
#include "resil/inject/apply.hpp"
#include "resil/inject/file_set.hpp"
#include "resil/inject/file_lock.hpp"
#include "resil/inject/names.hpp"
#include "resil/inject/plan.hpp"
#include "resil/inject/raw.hpp"
#include "resil/inject/storage.hpp"
#include "resil/inject/transaction.hpp"

namespace resil::app::ckpt_flip {

CLI::App* setup_inject(CLI::App& app, InjectOptions& o) {
  auto* c = app.add_subcommand("inject", "Flip bits in a copy of IN (or IN itself with --in-place) and write a flip log.");
  c->footer(
      "Examples:\n"
      "  ckpt-flip inject ckpt.h5 -o bad.h5 --seed 7 --flips 1 --log flips.jsonl\n"
      "  ckpt-flip inject model.pt -o bad.pt --seed 7 --flips 1 --log flips.jsonl      (torch.save; safetensors, .npy, .npz alike)\n"
      "  ckpt-flip inject llama/ -o bad-llama/ --seed 7 --flips 1 --log flips.jsonl   (a Hugging Face sharded checkpoint or a\n"
      "                                                                            torch.distributed.checkpoint directory)\n"
      "  ckpt-flip inject ckpt.h5 -o bad.h5 --seed 7 --ber 1e-9 --role model --log flips.jsonl\n"
      "  ckpt-flip inject model.h5 --in-place --seed 3 --flips 10 --bits exponent --include '*.weight' --log f.jsonl\n"
      "  ckpt-flip inject ckpt.h5 -o bad.h5 --seed 1 --flips 64 --stratify bits --model adjacent:2 --log f.jsonl\n"
      "  ckpt-flip inject ckpt.h5 --dry-run --seed 5 --flips 3 --bits exponent-msb\n"
      "  ckpt-flip inject ckpt.h5 -o broken.h5 --raw --seed 9 --flips 20 --log raw.jsonl\n"
      "  ckpt-flip inject ckpt.h5 -o bad.h5 --seed 4 --flips 100 --bits exponent --finite --log f.jsonl\n"
      "  ckpt-flip inject ckpt.h5 --in-place --seed 6 --flips 1 --hash sha256 --log f.jsonl   (every byte identified)\n"
      "Bits: names sign, exponent, exponent-msb, mantissa, mantissa-high, msb, lsb, all; numbers and ranges (0-7).\n"
      "Models: flip, adjacent:K, random-bits:K, burst[:K], stuck-at-0, stuck-at-1, random-value, zero, pattern:FILE.json");
  c->add_option("IN", o.input, "input checkpoint: a file, a shard index, or a sharded or DCP checkpoint's directory")->required();
  auto* out = c->add_option("-o,--output", o.output, "output file (IN is copied first; IN is never modified)");
  auto* inplace = c->add_flag("--in-place", o.in_place, "modify IN itself (crash-safe: the log is durable before any change)");
  auto* dry = c->add_flag("--dry-run", o.dry_run, "print the planned flips and write nothing");
  out->excludes(inplace);
  dry->excludes(out)->excludes(inplace);
  c->add_option("--log", o.log, "flip log to write (JSONL; required unless --dry-run)");
  c->add_option("--seed", o.seed, "root seed (drawn, printed and logged when not given)")->transform(app::Uint64());
  c->add_option("--trial", o.trial, "trial number: its own counter-based stream of the seed")->transform(app::Uint64());
  auto* flips = c->add_option("--flips", o.flips, "exact number of faults (sites without replacement)")->transform(app::Decimal(1, 100'000'000));
  auto* ber = c->add_option("--ber", o.ber, "probability per stored bit")->check(CLI::Range(0.0, 1.0));
  flips->excludes(ber);
  c->add_option("--include", o.include, "glob on dataset paths to include (repeatable; names counters explicitly)");
  c->add_option("--exclude", o.exclude, "glob on dataset paths to exclude (repeatable)");
  app::add_choice(*c, "--role", o.role, inject::role_names, "what the tensors are for: model, master (fp32 master weights of mixed precision), optimizer (the rest of the optimizer state) or all");
  add_bits_option(*c, o.bits, "bits that may be hit: field names and bit numbers/ranges");
  c->add_option("--model", o.model, "fault model");
  app::add_choice(*c, "--stratify", o.stratify, inject::stratify_names, "stratified sampling: none, bits or dataset");
  app::add_choice(*c, "--as", o.as, inject::as_names, "treat unsigned 16-bit datasets as this dtype (bf16: bfloat16, f16: IEEE half)");
  add_format_option(*c, o.format);
  add_keep_crc_option(*c, o.keep_crc);
  c->add_flag("--finite", o.finite,
              "redraw a site whose fault would leave a float NaN or Inf (the log's header counts the rejected draws; "
              "rates are then conditional on a finite outcome: docs/guide/ckpt-flip.md)");
  c->add_flag("--raw", o.raw, "flip bits anywhere in the file's bytes (HDF5 metadata included)");
  auto* hash = app::add_choice(*c, "--hash", o.hash, ckpt::file_hash_names,
                               "how the log identifies input and output for revert and replay: sample-sha256 (default: "
                               "SHA-256 of the size and a fixed 1.1 MiB sample, O(1) in the file size), sha256 (of every byte) or none");
  c->add_flag("--no-hash", o.no_hash, "the same as --hash none")->excludes(hash);
  c->add_flag("--no-sync", o.no_sync,
              "with --in-place: do not fsync the file's edited words at the end (the log is still durable before any byte "
              "changes, so revert/replay work after a crash; a power loss may lose some flips)");
  return c;
}

namespace {

inject::PlanOptions plan_options(const InjectOptions& o, std::uint64_t seed) {
  inject::PlanOptions p;
  p.seed = seed;
  p.trial = o.trial;
  p.flips = o.flips;
  p.ber = o.ber;
  p.stratify = o.stratify;
  p.model = inject::FaultModel::parse(o.model);
  p.finite = o.finite;
  return p;
}

}  // namespace

int run_inject(const InjectOptions& o) {
  if (!o.dry_run && o.output.empty() && !o.in_place) throw UsageError("inject: give -o OUT, --in-place or --dry-run");
  if (!o.dry_run && o.log.empty()) throw UsageError("inject: --log LOG.jsonl is required");
  if (!o.flips && !o.ber) throw UsageError("inject: give --flips N or --ber RATE");
  if (o.raw && (!o.include.empty() || !o.exclude.empty() || !o.bits.empty() || o.role != inject::Role::all || o.stratify != inject::Stratify::none || o.finite))
    throw UsageError("inject --raw takes no --include/--exclude/--bits/--role/--stratify/--finite (it flips file bytes)");
  // A sharded set's index (or a DCP directory) names several files: --raw flips one file's bytes.
  if (o.raw && inject::is_file_set(o.input))
    throw UsageError(o.input + ": a set of files (an index and its shards, or a DCP directory): --raw flips one file's bytes; name a shard");
  // Before anything is opened for writing: no path may name another's file (--log IN would replace
  // the data by the log, -o LOG the only undo record), inputs are regular readable files, outputs
  // regular files or new ones in an existing directory.
  if (!o.dry_run)
    ckpt::fs::require_distinct({{"input", o.input, o.in_place}, {"-o", o.output, true}, {"--log", o.log, true}});
  inject::require_input(o.input);
  // A set of files (sharded, DCP): -o and --log must not name any of its files either.
  if (!o.dry_run && inject::is_file_set(o.input)) {
    std::vector<ckpt::fs::PathArg> args{{"-o", o.output, true}, {"--log", o.log, true}};
    try {
      const auto set = inject::file_set(o.input, o.format);
      for (const auto& n : set.all()) args.push_back({"the input's file", set.dir / n, o.in_place});
    } catch (const Error&) {
      // the set's own open below says what is wrong with it, in its words
    }
    ckpt::fs::require_distinct(args);
  }
  if (!o.dry_run) {
    if (!o.output.empty()) require_output_for(o.input, o.output);
    ckpt::fs::require_output_file(o.log);
  }
  inject::set_keep_crc(o.keep_crc);
  const std::uint64_t seed = o.seed ? *o.seed : draw_seed();
  if (!o.seed) std::cout << "seed: " << seed << " (drawn; pass --seed " << seed << " to repeat)\n";
  const auto popt = plan_options(o, seed);

  // In place, one Storage serves listing, planning and applying: one open, one mapping, one
  // chunk-address lookup, so each touched page is faulted in once (it only reads until apply).
  // --raw flips the file's bytes whatever its format: it is never opened through an adapter.
  std::unique_ptr<inject::Storage> wf;
  // One in-place run per file, held from before the draw reads the file until its log is complete:
  // another run's flips landing in between would be lost or mixed with these.
  std::optional<inject::InPlaceLock> hold;
  if (o.in_place) hold.emplace(o.input);
  if (o.in_place && !o.raw) {
    wf = inject::open_storage(o.input, inject::Access::in_place, o.format);
    wf->set_sync(!o.no_sync);
  }
  std::vector<inject::FlipRecord> records;
  std::uint64_t rejected = 0;  // --finite
  if (o.raw) {
    records = inject::plan_raw(o.input, popt);
  } else {
    inject::SelectOptions sel;
    sel.include = o.include;
    sel.exclude = o.exclude;
    sel.role = o.role;
    sel.bits = inject::BitSpec::parse(o.bits.empty() ? "all" : o.bits);
    sel.as = o.as;
    // Without --in-place one read-only Storage serves listing, the --finite draw and planning.
    const auto rf = wf ? nullptr : inject::open_storage(o.input, inject::Access::read, o.format);
    inject::Storage& file = wf ? *wf : *rf;
    std::vector<inject::Target> targets;
    try {
      targets = inject::select(file.tensors(), sel);
    } catch (const NothingSelectedError& e) {
      e.rethrow_with(o.input + ": " + e.what());  // the user gave several paths: say which file
    }
    inject::Sampled sampled;
    try {
      sampled = inject::sample_sites(targets, popt, inject::words_of(file, targets));
    } catch (const NothingSelectedError& e) {
      e.rethrow_with(o.input + ": " + e.what());  // --finite found too few sites that stay finite
    }
    const auto& sites = sampled.sites;
    rejected = sampled.rejected;
    if (sites.empty()) std::cout << "no site drawn (--ber over the selected bits gave 0 faults)\n";
    records = inject::plan(file, targets, sites, popt);
    if (rf) rf->close();
  }

  if (o.dry_run) {
    std::cout << "planned " << records.size() << " fault(s), model " << popt.model.name() << ", seed " << seed << ", trial " << o.trial;
    if (o.finite) std::cout << ", " << rejected << " draw(s) rejected (--finite)";
    std::cout << "\n";
    for (const auto& r : records) {
      std::string where = r.raw ? std::string("(file)") : inject::display_name(r.dataset) + ckpt::shape_string(r.nd);
      if (r.global) where += " (global " + ckpt::shape_string(r.global->nd) + " of " + ckpt::shape_string(r.global->shape) + ")";
      std::string bits;
      for (unsigned b = 0; b < 64; ++b)
        if ((r.mask() >> b) & 1) bits += (bits.empty() ? "" : ",") + std::to_string(b);
      std::cout << "  " << where << "  " << (r.raw ? "" : std::string(ckpt::dtype_name(r.dtype)) + " ") << "bit " << (bits.empty() ? "-" : bits)
                << "  " << describe_change(r) << "\n";
    }
    return 0;
  }

  inject::LogHeader h;
  h.tool_version = resil::version;
  h.seed = seed;
  h.trial = o.trial;
  h.model = popt.model.name();
  h.args = o.argv;
  h.input = o.input;
  h.in_place = o.in_place;
  h.raw = o.raw;
  h.keep_crc = o.keep_crc && !o.raw;
  if (!o.raw) h.file_format = std::string(inject::format_name(wf ? wf->format() : inject::resolve_format(o.input, o.format)));
  h.planned = records.size();
  h.finite = o.finite;
  h.rejected = rejected;
  h.output = o.in_place ? o.input : o.output;
  h.hash = o.no_hash ? ckpt::FileHash::none : o.hash;
  h.input_hash = inject::checkpoint_hash(o.input, h.hash);

  inject::ApplyStats st;
  if (o.in_place) {
    // The log is durable before the first byte of IN changes (inject::apply_logged).
    const inject::TransactionOptions topt{.sync = !o.no_sync, .hash_output = h.hash != ckpt::FileHash::none, .format = o.format};
    st = (wf ? inject::apply_logged(o.log, h, records, *wf, topt) : inject::apply_logged(o.log, h, records, o.input, topt)).stats;
  } else {
    // The log too is written to a temporary sibling and renamed into place after the output: an
    // error leaves neither, and never removes a log that was there before.
    const auto log_target = ckpt::fs::write_target(o.log, "--log");  // through a link: its target
    const auto log_tmp = ckpt::fs::temp_sibling(log_target);
    ckpt::fs::RemoveOnError log_guard(log_tmp);
    std::string out_hash;
    try {
      with_output_copy(o.input, o.output, [&](const std::string& tmp) {
        st = inject::apply(tmp, records, inject::Direction::forward, false, false, true, o.format);
        out_hash = inject::checkpoint_hash(tmp, h.hash);
        h.output_hash = out_hash;
        inject::LogWriter log(log_tmp, o.input, true);
        log.line(inject::header_line(h));
        log.records(records);
        log.line(inject::footer_line(st.changed, out_hash, h.hash));
        log.close();
      });
      ckpt::fs::durable_rename(log_tmp, log_target);
    } catch (const Error& e) {
      rethrow_renamed(e, log_tmp.string(), o.log);
    }
    log_guard.keep();
  }
  std::set<std::string> touched;
  for (const auto& r : records) touched.insert(r.dataset);
  std::cout << "injected " << records.size() << " fault(s) (" << st.changed << " word(s) changed) in "
            << (o.raw ? std::string("the file's bytes") : std::to_string(touched.size()) + " dataset(s)") << " -> "
            << (o.in_place ? o.input : o.output) << "; log " << o.log << "; seed " << seed;
  if (o.finite) std::cout << "; " << rejected << " draw(s) rejected (--finite)";
  std::cout << "\n";
  return 0;
}

}  // namespace resil::app::ckpt_flip
