#include <iostream>
#include <optional>

#include "commands.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/inject/apply.hpp"
#include "resil/inject/file_lock.hpp"
#include "resil/inject/file_set.hpp"
#include "resil/inject/plan.hpp"
#include "resil/inject/storage.hpp"

namespace resil::app::ckpt_flip {

CLI::App* setup_replay(CLI::App& app, ReplayOptions& o) {
  auto* c = app.add_subcommand("replay", "Re-apply the flips of a log exactly, to FILE or to a copy of it.");
  c->footer(
      "Examples:\n"
      "  ckpt-flip replay ckpt-copy.h5 --log flips.jsonl\n"
      "  ckpt-flip replay ckpt.h5 --log flips.jsonl -o bad-again.h5");
  c->add_option("FILE", o.file, "file to apply the flips to (must hold the logged old bits)")->required();
  c->add_option("--log", o.log, "flip log")->required();
  c->add_option("-o,--output", o.output, "write to OUT (a copy of FILE) instead of modifying FILE");
  add_format_option(*c, o.format);
  add_keep_crc_option(*c, o.keep_crc);
  c->add_flag("--force", o.force, "write the logged new bits even where the file holds unexpected bits or another hash than the log's");
  return c;
}

int run_replay(const ReplayOptions& o) {
  ckpt::fs::require_distinct({{"FILE", o.file, o.output.empty()}, {"--log", o.log, false}, {"-o", o.output, true}});
  inject::require_input(o.file);
  if (!o.output.empty()) require_output_for(o.file, o.output);
  // In place: held from before the file's identity is checked until the edit is complete.
  std::optional<inject::InPlaceLock> hold;
  if (o.output.empty()) hold.emplace(o.file);
  const auto log = inject::read_log(o.log);  // a log cut short is refused (exit 4)
  inject::require_logged_format(o.file, log.header, o.log, o.format);
  // The file the log was made from, before or after its flips, by the hash the log names.
  if (!o.force) inject::require_logged_identity(o.file, log, o.log);
  inject::set_keep_crc(o.keep_crc || log.header.keep_crc);  // the logged injection's CRCs, exactly
  // The stored CRCs after a killed run are those of neither state: computed from the bytes instead.
  inject::set_recompute_crc(!(o.keep_crc || log.header.keep_crc));
  inject::ApplyStats st;
  if (o.output.empty()) st = inject::apply(o.file, log.records, inject::Direction::forward, o.force, true, true, o.format);
  else {
    // FILE's content is checked before it is copied: a file of no supported format is an error
    // naming FILE, not the -o copy it was found in.
    inject::open_storage(o.file, inject::Access::read, o.format)->close();
    with_output_copy(o.file, o.output, [&](const std::string& tmp) { st = inject::apply(tmp, log.records, inject::Direction::forward, o.force, false, true, o.format); });
  }
  std::cout << "replayed " << log.records.size() << " record(s): " << st.changed << " word(s) changed, " << st.unchanged
            << " already in the logged state -> " << (o.output.empty() ? o.file : o.output) << "\n";
  return 0;
}

}  // namespace resil::app::ckpt_flip
