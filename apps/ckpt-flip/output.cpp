#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "commands.hpp"
#include "resil/core/error.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/app/choice.hpp"
#include "resil/campaign/report.hpp"
#include "resil/inject/file_set.hpp"

namespace resil::app::ckpt_flip {

void add_format_option(CLI::App& c, inject::Format& format) {
  add_choice(c, "--format", format, inject::format_names,
             "the file format (default auto: detected from the content, never from the name; docs/reference/ckpt-flip.md)");
}

void add_keep_crc_option(CLI::App& c, bool& keep_crc) {
  c.add_flag("--keep-crc", keep_crc,
             "torch.save and .npz: leave the zip CRC-32 of edited members as it was (storage corruption the container can "
             "notice); revert and replay also do this when the log says the injection did");
}

void add_bits_option(CLI::App& c, std::string& bits, const std::string& help) {
  c.add_option("--bits", bits, help)
      ->check(CLI::Validator([](std::string& s) { return s.empty() ? std::string("empty: give bit names or numbers (all: every bit)") : std::string(); },
                             "BITS"));
}

std::string describe_change(const inject::FlipRecord& r) {
  char buf[160];
  if (r.raw) {
    std::snprintf(buf, sizeof buf, "byte %llu  %s -> %s", static_cast<unsigned long long>(r.index),
                  inject::hex_bits(r.old_bits, 8).c_str(), inject::hex_bits(r.new_bits, 8).c_str());
    return buf;
  }
  const double a = ckpt::word_to_double(r.dtype, r.old_bits), b = ckpt::word_to_double(r.dtype, r.new_bits);
  std::string flag;
  if (std::isnan(b)) flag = "  [becomes NaN]";
  else if (std::isinf(b)) flag = "  [becomes Inf]";
  else if (a != 0 && b != 0 && std::fabs(std::log10(std::fabs(b) / std::fabs(a))) >= 3)
    flag = "  [x1e" + std::to_string(static_cast<int>(std::lround(std::log10(std::fabs(b) / std::fabs(a))))) + "]";
  else if ((a == 0) != (b == 0) && std::fabs(a == 0 ? b : a) >= 1e3) flag = "  [magnitude jump]";
  std::snprintf(buf, sizeof buf, "%.9g -> %.9g  (%s -> %s)", a, b, inject::hex_bits(r.old_bits, r.width).c_str(),
                inject::hex_bits(r.new_bits, r.width).c_str());
  return buf + flag;
}

void require_output_for(const std::string& from, const std::string& to) {
  if (!inject::is_file_set(from)) {
    ckpt::fs::require_output_file(to);
    return;
  }
  // A set's copy is a directory of its own: a new one, or an empty one; for a checkpoint that is a
  // directory (DCP), outside it (a copy inside would add a directory to the input). An index file's
  // directory is not the input: a Hugging Face model directory holds other files beside the set.
  namespace stdfs = std::filesystem;
  std::error_code ec;
  if (stdfs::is_directory(from)) {
    const stdfs::path input = stdfs::weakly_canonical(stdfs::absolute(from), ec);
    const stdfs::path target = stdfs::weakly_canonical(stdfs::absolute(to), ec);
    if (!input.empty() && !target.empty() && std::mismatch(input.begin(), input.end(), target.begin(), target.end()).first == input.end())
      throw UsageError("-o " + to + ": inside the input's directory " + input.string() + "; the copy goes outside it");
  }
  const auto st = stdfs::symlink_status(to, ec);
  if (stdfs::exists(st)) {
    if (!stdfs::is_directory(st) || !stdfs::is_empty(to, ec))
      throw IoError("-o " + to + ": exists; the copy of a set of files is a new (or empty) directory");
    return;
  }
  // "bad-llama/" names the directory bad-llama: its parent must exist.
  stdfs::path named = stdfs::path(to).lexically_normal();
  if (!named.has_filename()) named = named.parent_path();
  const stdfs::path dir = named.parent_path().empty() ? stdfs::path(".") : named.parent_path();
  if (!stdfs::is_directory(dir, ec)) throw IoError("-o " + to + ": its directory " + dir.string() + " does not exist");
}

namespace {

// The copy of a set of files (a sharded checkpoint) in a new directory `to`: built in a temporary
// sibling directory and renamed into place after fn, removed on error.
void with_set_copy(const std::string& from, const std::string& to, const std::function<void(const std::string&)>& fn) {
  namespace stdfs = std::filesystem;
  require_output_for(from, to);
  const stdfs::path target = stdfs::absolute(to).lexically_normal();
  const auto tmp = ckpt::fs::temp_sibling(target.has_filename() ? target : target.parent_path());
  struct RemoveAll {
    stdfs::path p;
    bool keep = false;
    ~RemoveAll() {
      std::error_code ec;
      if (!keep && ckpt::fs::owned_by_me(p)) stdfs::remove_all(p, ec);  // never what someone else put there
    }
  } guard{tmp};
  try {
    std::error_code ec;
    ckpt::fs::create_new_directory(tmp, ckpt::fs::derived_directory_mode(stdfs::is_directory(from) ? stdfs::path(from) : stdfs::path(from).parent_path()));
    // An index file's set is copied with its index under the index's name; a directory's as it is.
    const bool by_index = !stdfs::is_directory(from);
    const stdfs::path entry = by_index ? tmp / stdfs::path(from).filename() : tmp;
    if (by_index) inject::copy_checkpoint(from, entry);
    else {
      stdfs::remove(tmp, ec);
      inject::copy_checkpoint(from, tmp);
    }
    fn(entry.string());
    if (stdfs::exists(target)) stdfs::remove(target, ec);  // the empty directory require_output_for allowed
    ckpt::fs::durable_rename(tmp, target);
  } catch (const Error& e) {
    rethrow_renamed(e, tmp.string(), to);
  }
  guard.keep = true;
}

}  // namespace

void with_output_copy(const std::string& from, const std::string& to, const std::function<void(const std::string&)>& fn) {
  if (inject::is_file_set(from)) {
    with_set_copy(from, to, fn);
    return;
  }
  // The callers checked the paths (ckpt::fs::require_distinct: `to` is not `from`).
  ckpt::fs::require_output_file(to);
  // Through a symbolic link the file written is its target (the link stays a link), as the path
  // checks take it.
  const auto target = ckpt::fs::write_target(to);
  const auto tmp = ckpt::fs::temp_sibling(target);
  ckpt::fs::RemoveOnError guard(tmp);
  try {
    ckpt::fs::copy_file(from, tmp);
    fn(tmp.string());
    ckpt::fs::durable_rename(tmp, target);
  } catch (const Error& e) {
    // The user named `to`; `.NAME.tmp.PID` means nothing to them (and is gone when they look).
    rethrow_renamed(e, tmp.string(), to);
  }
  guard.keep();
}

void require_report_outputs_apart(const std::vector<ckpt::fs::PathArg>& args, const std::vector<std::string>& campaign_dirs) {
  namespace stdfs = std::filesystem;
  // The campaigns' files first: a clash then names the option ("--json X is the same file as ...").
  std::vector<ckpt::fs::PathArg> all;
  for (const auto& dir : campaign_dirs)
    for (const auto& f : inject::report_inputs(dir)) all.push_back({"campaign file", f, false});
  for (const auto& dir : campaign_dirs) {
    const stdfs::path results = stdfs::path(dir) / "results";
    for (const auto& a : args) {
      std::error_code ec;
      const stdfs::path parent = a.path.parent_path().empty() ? stdfs::path(".") : a.path.parent_path();
      if (a.written && a.path.extension() == ".jsonl" && stdfs::equivalent(parent, results, ec))
        throw UsageError(a.name + " " + a.path.string() + " lies in " + results.string() +
                         ", where the campaign reads every .jsonl as its records (write it elsewhere)");
    }
  }
  all.insert(all.end(), args.begin(), args.end());
  ckpt::fs::require_distinct(all);
}

}  // namespace resil::app::ckpt_flip
