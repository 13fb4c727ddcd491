#include <fcntl.h>
#include <spawn.h>
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
#include "resil/campaign/report.hpp"

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

namespace {

// Run `argv` (no shell: a path is never parsed as code) with stdout to `out_file`, stderr inherited;
// its exit status, or -1 when it could not be started.
int run_plain(const std::vector<std::string>& argv, const std::filesystem::path& out_file) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int e = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (e != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The plot script draws into a fresh directory of its own; each PNG it names is then moved beside
// the markdown after the checks every output gets (not an input, not another output: the rename
// replaces a link there instead of writing through it). Returns the names moved.
std::vector<std::string> draw_plots(const ReportOptions& o, const nlohmann::json& rep, const std::string& script) {
  namespace stdfs = std::filesystem;
  const stdfs::path md(o.markdown);
  const stdfs::path dir = md.parent_path().empty() ? stdfs::path(".") : md.parent_path();
  const stdfs::path tmp = dir / (".report-plots." + std::to_string(::getpid()));
  std::error_code ec;
  ckpt::fs::create_new_directory(tmp, 0700);  // a leftover of this user's is replaced; anyone else's is refused, kept
  struct Cleanup {
    stdfs::path p;
    ~Cleanup() {
      std::error_code e;
      stdfs::remove_all(p, e);
    }
  } cleanup{tmp};
  ckpt::fs::write_file_atomic(tmp / "report.json", rep.dump() + "\n");
  const char* py = std::getenv("PYTHON");
  const int rc = run_plain({py ? py : "/usr/bin/python3", script, (tmp / "report.json").string(), tmp.string()}, tmp / "plots.txt");
  if (rc != 0) {
    std::cerr << "ckpt-flip: warning: the plot script failed (exit " << rc << "); the markdown has no plots\n";
    return {};
  }
  std::vector<std::string> plots;
  std::istringstream in(ckpt::fs::read_file(tmp / "plots.txt"));
  for (std::string name; std::getline(in, name);) {
    if (name.empty()) continue;
    if (name.find('/') != std::string::npos || name == "." || name == ".." || !stdfs::is_regular_file(tmp / name, ec))
      throw IoError(script + ": named a plot that is not a file it wrote: '" + name + "'");
    plots.push_back(name);
  }
  // Every target is checked before the first rename: a refused plot leaves none moved.
  std::vector<ckpt::fs::PathArg> outs = {{"--json", o.json, true}, {"--records", o.records, true}, {"--markdown", o.markdown, true}};
  for (const auto& name : plots) outs.push_back({"a plot", dir / name, true});
  require_report_outputs_apart(outs, {o.dir});
  for (const auto& name : plots) ckpt::fs::require_output_file(dir / name, "a plot");
  for (const auto& name : plots) ckpt::fs::durable_rename(tmp / name, dir / name);
  return plots;
}

}  // namespace

int run_report(const ReportOptions& o) {
  namespace stdfs = std::filesystem;
  require_report_outputs_apart({{"--json", o.json, true}, {"--markdown", o.markdown, true}, {"--records", o.records, true}}, {o.dir});
  if (!o.markdown.empty() && !o.no_plots) {
    // A script the user named must be there (never skipped without a word); the default one may
    // be absent (an install without the source tree): a warning below.
    if (!o.plot_script.empty()) ckpt::fs::require_input_file(o.plot_script, "--plot-script");
    // The plots go beside the markdown as plot-*.png: an output of that name there would be replaced.
    const stdfs::path md_dir = stdfs::path(o.markdown).parent_path().empty() ? stdfs::path(".") : stdfs::path(o.markdown).parent_path();
    for (const auto& [opt, path] : {std::pair<const char*, const std::string&>{"--json", o.json}, {"--records", o.records}}) {
      std::error_code ec;
      const stdfs::path p(path), dir = p.parent_path().empty() ? stdfs::path(".") : p.parent_path();
      const std::string name = p.filename().string();
      if (!path.empty() && name.starts_with("plot-") && name.ends_with(".png") && stdfs::equivalent(dir, md_dir, ec))
        throw UsageError(std::string(opt) + " " + path + " would be replaced by a plot (plot-*.png beside --markdown); give it another name, or --no-plots");
    }
  }
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
    if (!o.no_plots && stdfs::exists(script)) plots = draw_plots(o, rep, script);
    else if (!o.no_plots) std::cerr << "ckpt-flip: warning: the plot script " << script << " is not there; the markdown has no plots\n";
    ckpt::fs::write_file_atomic(md, inject::report_markdown(rep, plots));
    std::cout << "Markdown: " << o.markdown << (plots.empty() ? "" : " (" + std::to_string(plots.size()) + " plots)") << "\n";
  }
  return 0;
}

}  // namespace resil::app::ckpt_flip
