#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "resil/app/validators.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/core/error.hpp"
#include "resil/inject/campaign_report.hpp"

namespace resil::app::ckpt_flip {

CLI::App* setup_report(CLI::App& app, ReportOptions& o) {
  auto* c = app.add_subcommand("report", "Merge a campaign's shards and report classes and rates with Wilson and Clopper-Pearson intervals.");
  c->footer(
      "Examples:\n"
      "  ckpt-flip report res\n"
      "  ckpt-flip report res --json res/report.json --markdown res/report.md     # + PNG plots next to the markdown\n"
      "  ckpt-flip report res --records merged.jsonl                              # all shards' records, by trial id\n"
      "Plots: scripts/report_plots.py (matplotlib, /usr/bin/python3 or $PYTHON); --no-plots to skip.");
  c->add_option("DIR", o.dir, "campaign directory (--out of ckpt-flip campaign)")->required()->check(app::NonEmptyPath());
  c->add_option("--json", o.json, "write the report as JSON");
  c->add_option("--markdown", o.markdown, "write the report as Markdown (with PNG plots beside it)");
  c->add_option("--records", o.records, "write the merged records (JSONL, sorted by trial id)");
  c->add_option("--plot-script", o.plot_script, "plot script (default: the source tree's scripts/report_plots.py)");
  c->add_flag("--no-plots", o.no_plots, "do not draw plots");
  return c;
}

int run_report(const ReportOptions& o) {
  namespace stdfs = std::filesystem;
  require_report_outputs_apart({{"--json", o.json, true}, {"--markdown", o.markdown, true}, {"--records", o.records, true}}, {o.dir});
  nlohmann::json rep;
  try {
    rep = inject::build_report(o.dir);
    std::cout << inject::report_text(rep);
  } catch (const nlohmann::json::exception& e) {
    // A field of the wrong type in a hand-edited file: one line naming the campaign, not an internal error.
    throw CorruptInputError(o.dir + ": a malformed campaign file (campaign.json, golden.json or a record): " + e.what());
  }
  if (!o.json.empty()) {
    ckpt::fs::write_file_atomic(o.json, rep.dump(2) + "\n");
    std::cout << "\nJSON: " << o.json << "\n";
  }
  if (!o.records.empty()) {
    std::string text;
    for (const auto& r : inject::merged_records(o.dir)) text += r.dump() + "\n";
    ckpt::fs::write_file_atomic(o.records, text);
    std::cout << "records: " << o.records << "\n";
  }
  if (!o.markdown.empty()) {
    std::vector<std::string> plots;
    const stdfs::path md(o.markdown);
    const std::string script = o.plot_script.empty() ? RESIL_PLOT_SCRIPT : o.plot_script;
    if (!o.no_plots && stdfs::exists(script)) {
      // The plot script reads the report JSON and writes PNGs beside the markdown; it prints their names.
      const stdfs::path tmp_json = md.parent_path() / (".report-plot-input." + std::to_string(::getpid()) + ".json");
      ckpt::fs::write_file_atomic(tmp_json, rep.dump() + "\n");
      const char* py = std::getenv("PYTHON");
      const std::string list = (md.parent_path().empty() ? stdfs::path(".") : md.parent_path()) / (".report-plots." + std::to_string(::getpid()));
      const std::string cmd = std::string(py ? py : "/usr/bin/python3") + " '" + script + "' '" + tmp_json.string() + "' '" +
                              (md.parent_path().empty() ? std::string(".") : md.parent_path().string()) + "' > '" + list + "'";
      const int rc = std::system(cmd.c_str());
      if (rc == 0) {
        std::istringstream in(ckpt::fs::read_file(list));
        for (std::string line; std::getline(in, line);)
          if (!line.empty()) plots.push_back(line);
      } else {
        std::cerr << "ckpt-flip: warning: the plot script failed (exit " << (WIFEXITED(rc) ? WEXITSTATUS(rc) : rc) << "); the markdown has no plots\n";
      }
      std::error_code ec;
      stdfs::remove(tmp_json, ec);
      stdfs::remove(list, ec);
    }
    ckpt::fs::write_file_atomic(md, inject::report_markdown(rep, plots));
    std::cout << "Markdown: " << o.markdown << (plots.empty() ? "" : " (" + std::to_string(plots.size()) + " plots)") << "\n";
  }
  return 0;
}

}  // namespace resil::app::ckpt_flip
