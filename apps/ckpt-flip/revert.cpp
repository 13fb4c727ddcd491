#include <iostream>
#include <string>

#include "commands.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/core/error.hpp"
#include "resil/inject/apply.hpp"
#include "resil/inject/file_lock.hpp"
#include "resil/inject/file_set.hpp"
#include "resil/inject/plan.hpp"

namespace resil::app::ckpt_flip {

CLI::App* setup_revert(CLI::App& app, RevertOptions& o) {
  auto* c = app.add_subcommand("revert", "Undo the flips of a log exactly (datasets byte-identical to before).");
  c->footer(
      "Examples:\n"
      "  ckpt-flip revert bad.h5 --log flips.jsonl\n"
      "  ckpt-flip revert ckpt.h5 --log flips.jsonl      # after an --in-place run, even one killed midway");
  c->add_option("FILE", o.file, "file the flips were applied to")->required();
  c->add_option("--log", o.log, "flip log")->required();
  add_format_option(*c, o.format);
  add_keep_crc_option(*c, o.keep_crc);
  c->add_flag("--force", o.force, "restore the logged old bits even where the file holds unexpected bits or another hash than the log's");
  return c;
}

int run_revert(const RevertOptions& o) {
  ckpt::fs::require_distinct({{"FILE", o.file, true}, {"--log", o.log, false}});
  inject::require_input(o.file);
  // Held from before the file's identity is checked until the edit is complete: an in-place run
  // between the check and the edit would otherwise be undone under another run's log.
  const inject::InPlaceLock hold(o.file);
  // A kill while the log was being written leaves it cut inside a line, or between two whole
  // lines with fewer records than planned and no footer. An injection changes its file only once
  // the header and every record are durable, so such a log has nothing to undo.
  const auto log = inject::read_log(o.log, inject::Tail::may_be_cut);
  if (log.cut_before_records_complete()) {
    // That holds for the file the log names as its input: one with another hash (a log cut short
    // beside a file that holds its flips) may have something to undo the log no longer lists.
    const auto& h = log.header;
    if (!o.force && log.has_header && h.hash != ckpt::FileHash::none && !h.input_hash.empty() && inject::checkpoint_hash(o.file, h.hash) != h.input_hash)
      throw MismatchError(o.file + ": the flip log " + o.log + " ends before its records do, and " + o.file + " is not its input (its " +
                          std::string(ckpt::file_hash_name(h.hash)) + " hash differs): it may hold flips the log no longer lists "
                          "(--force: take it as untouched)");
    std::cout << "nothing to undo: " << o.log << " was cut short while it was being written (a killed injection), "
              << "before any byte of " << o.file << " changed\n";
    return 0;
  }
  inject::require_logged_format(o.file, log.header, o.log, o.format);
  // The file the log was made from, before or after its flips, by the hash the log names.
  if (!o.force) inject::require_logged_identity(o.file, log, o.log);
  // A log made with --keep-crc left the old CRCs: restoring the words must leave them too.
  inject::set_keep_crc(o.keep_crc || log.header.keep_crc);
  // The stored CRCs after a killed run are those of neither state: computed from the bytes instead.
  inject::set_recompute_crc(!(o.keep_crc || log.header.keep_crc));
  const auto st = inject::apply(o.file, log.records, inject::Direction::revert, o.force, true, true, o.format);
  std::cout << "reverted " << log.records.size() << " record(s): " << st.changed << " word(s) restored, " << st.unchanged
            << " already original" << (log.complete ? "" : " (the log has no footer: the injection was interrupted)") << "\n";
  return 0;
}

}  // namespace resil::app::ckpt_flip
