// Paths that name one file twice, files that are not regular files, datasets kept in external raw
// files, flip logs cut by a kill, errors met on temporary copies, failed in-place injections.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>

#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/ckpt/io.hpp"
#include "resil/core/error.hpp"
#include "resil/inject/flip_log.hpp"
#include "resil/inject/apply.hpp"
#include "resil/inject/fault_model.hpp"
#include "resil/inject/plan.hpp"
#include "resil/inject/sampling.hpp"
#include "resil/inject/select.hpp"
#include "resil/inject/transaction.hpp"
#include "resil_test/tmpdir.hpp"

using namespace resil;
namespace fs = ckpt::fs;

namespace {

void write_text(const std::filesystem::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// A file with /ext (16 f32 kept in `raw.bin` next to it, named relatively) and /inner (in the file).
void make_external_file(const std::filesystem::path& dir, float base) {
  std::string raw(16 * sizeof(float), '\0');
  for (int i = 0; i < 16; ++i) {
    const float v = base + static_cast<float>(i);
    std::memcpy(raw.data() + i * sizeof(float), &v, sizeof v);
  }
  write_text(dir / "raw.bin", raw);
  auto f = ckpt::h5::create_file((dir / "ext.h5").string());
  const hsize_t n = 16;
  ckpt::h5::Dataspace space(H5Screate_simple(1, &n, nullptr));
  ckpt::h5::PropList dcpl(H5Pcreate(H5P_DATASET_CREATE));
  REQUIRE(H5Pset_external(dcpl, "raw.bin", 0, raw.size()) >= 0);
  ckpt::h5::Dataset d(H5Dcreate2(f, "/ext", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  REQUIRE(d.valid());
  ckpt::Tensor t(ckpt::DType::f32, {4});
  ckpt::write_tensor(f, "/inner", t);
}

}  // namespace

TEST_CASE("require_distinct: one file under two names is refused when either is written", "[inject][unit]") {
  test::TempDir dir("hostile-distinct");
  const auto a = dir / "a.h5", b = dir / "b.h5";
  write_text(a, "a");
  write_text(b, "b");
  std::filesystem::create_hard_link(a, dir / "a-hard");
  std::filesystem::create_symlink(a, dir / "a-soft");
  std::filesystem::create_directory(dir / "sub");
  std::filesystem::create_directory_symlink(dir / "sub", dir / "sub-link");
  for (const auto& alias : {a, dir / "a-hard", dir / "a-soft", dir / "sub" / ".." / "a.h5"}) {
    CHECK_THROWS_AS(fs::require_distinct({{"input", a, false}, {"--log", alias, true}}), UsageError);
    CHECK_THROWS_AS(fs::require_distinct({{"input", a, true}, {"--log", alias, false}}), UsageError);
    CHECK_NOTHROW(fs::require_distinct({{"A", a, false}, {"B", alias, false}}));  // both only read
  }
  // Neither exists yet: the same canonical path (through a directory link) is one file.
  CHECK_THROWS_AS(fs::require_distinct({{"-o", dir / "sub" / "new", true}, {"--log", dir / "sub-link" / "new", true}}), UsageError);
  CHECK_NOTHROW(fs::require_distinct({{"-o", dir / "sub" / "new", true}, {"--log", dir / "sub" / "new2", true}}));
  CHECK_NOTHROW(fs::require_distinct({{"input", a, true}, {"--log", b, true}, {"-o", "", true}}));
  try {
    fs::require_distinct({{"input", a, true}, {"-o", b, true}, {"--log", dir / "a-soft", true}});
    FAIL("not refused");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("--log") != std::string::npos);
    CHECK(std::string(e.what()).find("input") != std::string::npos);
  }
}

TEST_CASE("inputs must be readable regular files, outputs regular or new; refused as I/O errors", "[inject][unit]") {
  test::TempDir dir("hostile-kinds");
  write_text(dir / "f", "x");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  CHECK_NOTHROW(fs::require_input_file(dir / "f"));
  for (const auto& bad : {dir / "fifo", dir.path(), std::filesystem::path("/dev/null"), dir / "missing"}) {
    CHECK_THROWS_AS(fs::require_input_file(bad), IoError);
    CHECK_THROWS_AS(ckpt::h5::open_file(bad.string(), ckpt::h5::Mode::read), IoError);  // never blocks on the FIFO
    CHECK_THROWS_AS(inject::read_log(bad), IoError);
    CHECK_THROWS_AS(fs::read_file(bad), IoError);
    // A pattern table is an input too: the FIFO blocked the read forever, /dev/zero never ended.
    CHECK_THROWS_AS(inject::FaultModel::parse("pattern:" + bad.string()), IoError);
  }
  CHECK_THROWS_AS(inject::FaultModel::parse("pattern:/dev/zero"), IoError);
  CHECK_NOTHROW(fs::require_output_file(dir / "f"));
  CHECK_NOTHROW(fs::require_output_file(dir / "new"));
  CHECK_THROWS_AS(fs::require_output_file("/dev/null"), IoError);
  CHECK_THROWS_AS(fs::require_output_file(dir / "fifo"), IoError);
  CHECK_THROWS_AS(fs::require_output_file(dir.path()), IoError);
  CHECK_THROWS_AS(fs::require_output_file(dir / "nodir" / "x"), IoError);
  // Every JSON report goes through write_file_atomic: its rename must never land on a FIFO, a
  // device node (as root a rename would replace /dev/null: ec-train --report /dev/null) or a directory.
  CHECK_THROWS_AS(fs::write_file_atomic(dir / "fifo", "{}"), IoError);
  CHECK_THROWS_AS(fs::write_file_atomic(dir.path(), "{}"), IoError);
  CHECK_THROWS_AS(fs::write_file_atomic("/dev/null", "{}"), IoError);
  CHECK(std::filesystem::is_fifo(dir / "fifo"));
  fs::write_file_atomic(dir / "f", "y");
  CHECK(fs::read_file(dir / "f") == "y");
}

TEST_CASE("a flip log cut by a kill: nothing applied before its records are complete", "[inject][unit]") {
  inject::LogHeader h;
  h.planned = 2;
  inject::FlipRecord r;
  r.dataset = "/w";
  r.dtype = ckpt::DType::f32;
  r.width = 32;
  r.old_bits = 1;
  r.new_bits = 3;
  r.anchor = 1;
  inject::FlipRecord r2 = r;  // the same word again: its chain goes on from r's new bits
  r2.old_bits = 3;
  r2.new_bits = 7;
  r2.anchor = 2;
  const std::string hdr = inject::header_line(h) + "\n", rec = inject::record_line(r, 0) + "\n",
                    rec2 = inject::record_line(r2, 1) + "\n", foot = inject::footer_line(1, "") + "\n";
  using inject::Tail;
  const auto cut = [](const std::string& s) { return inject::parse_log(s, "t", Tail::may_be_cut); };
  CHECK(cut("").cut_before_records_complete());
  CHECK(cut(hdr.substr(0, 10)).cut_before_records_complete());
  CHECK(cut(hdr.substr(0, hdr.size() - 1)).cut_before_records_complete());
  CHECK(cut(hdr + rec.substr(0, 5)).cut_before_records_complete());
  const auto footer_cut = cut(hdr + rec + rec2 + foot.substr(0, 4));
  CHECK_FALSE(footer_cut.cut_before_records_complete());
  CHECK(footer_cut.records.size() == 2);
  CHECK_FALSE(footer_cut.complete);
  CHECK_FALSE(cut(hdr + rec + rec2 + foot).cut_short);
  // Cut between two whole lines (a kill between two writes): fewer records than planned and no
  // footer is a cut log too, whatever its last byte (docs/reference/flip-log.md, "Cut logs").
  CHECK(cut(hdr + rec).cut_before_records_complete());  // 1 of 2 records, lines whole
  CHECK(cut(hdr).cut_before_records_complete());
  CHECK_THROWS_AS(inject::parse_log(hdr + rec, "t"), CorruptInputError);
  // Every record there, no footer (an interrupted in-place run): revert handles it.
  CHECK_FALSE(cut(hdr + rec + rec2).cut_before_records_complete());
  // Strict parsing (replay) and damage that is not a cut tail stay errors.
  CHECK_THROWS_AS(inject::parse_log(hdr + rec.substr(0, 5), "t"), CorruptInputError);
  CHECK_THROWS_AS(inject::parse_log("", "t"), CorruptInputError);
  CHECK_THROWS_AS(cut("garbage\n" + hdr.substr(0, 5)), CorruptInputError);
  CHECK_THROWS_AS(cut(hdr + "garbage\n" + rec), CorruptInputError);
}

TEST_CASE("rethrow_renamed keeps the error class and exit code", "[inject][unit]") {
  try {
    try {
      throw MismatchError("/d/.x.h5.tmp.123: dataset /w: found bits; /d/.x.h5.tmp.123 again");
    } catch (const Error& e) {
      rethrow_renamed(e, "/d/.x.h5.tmp.123", "/d/x.h5");
    }
  } catch (const MismatchError& e) {
    CHECK(std::string(e.what()) == "/d/x.h5: dataset /w: found bits; /d/x.h5 again");
  }
  try {
    try {
      throw Hdf5Error("t: x", ExitCode::corrupt_input);
    } catch (const Error& e) {
      rethrow_renamed(e, "t", "u");
    }
  } catch (const Error& e) {
    CHECK(e.exit_code() == ExitCode::corrupt_input);
  }
}

TEST_CASE("external raw data: listed, never selected, never written; read next to the HDF5 file", "[inject][unit]") {
  test::TempDir dir("hostile-external");
  std::filesystem::create_directory(dir / "one");
  std::filesystem::create_directory(dir / "two");
  make_external_file(dir / "one", 100.0f);
  make_external_file(dir / "two", 200.0f);
  const auto file = (dir / "one" / "ext.h5").string();
  const auto raw_before = ckpt::sha256_file((dir / "one" / "raw.bin").string());
  const auto h5_before = ckpt::sha256_file(file);

  std::vector<ckpt::DatasetInfo> infos;
  {
    auto f = ckpt::h5::open_file(file, ckpt::h5::Mode::read);
    infos = ckpt::list_datasets(f);
  }
  REQUIRE(infos.size() == 2);
  CHECK(infos[0].path == "/ext");
  CHECK(infos[0].external == std::vector<std::string>{"raw.bin"});
  CHECK(infos[1].external.empty());
  const auto targets = inject::select(infos, {});
  REQUIRE(targets.size() == 1);
  CHECK(targets[0].info.path == "/inner");
  inject::SelectOptions only_ext;
  only_ext.include = {"/ext"};
  CHECK_THROWS_AS(inject::select(infos, only_ext), NothingSelectedError);

  // Read from elsewhere (a decoy raw.bin in the current directory): each file's own raw.bin.
  const auto cwd = std::filesystem::current_path();
  write_text(dir / "raw.bin", std::string(64, '\0'));
  std::filesystem::current_path(dir.path());
  float first_one = 0, first_two = 0;
  {
    auto f1 = ckpt::h5::open_file(file, ckpt::h5::Mode::read);
    auto f2 = ckpt::h5::open_file((dir / "two" / "ext.h5").string(), ckpt::h5::Mode::read);
    first_one = ckpt::read_tensor(f1, "/ext").as<float>()[0];
    first_two = ckpt::read_tensor(f2, "/ext").as<float>()[0];
  }
  std::filesystem::current_path(cwd);
  CHECK(first_one == 100.0f);
  CHECK(first_two == 200.0f);

  // A record naming the external dataset (hand-made log): refused before anything is written,
  // in place (revert/replay) and on a private copy (-o).
  inject::FlipRecord r;
  r.dataset = "/ext";
  r.index = 1;
  r.nd = {1};
  r.dtype = ckpt::DType::f32;
  r.width = 32;
  const float v = 101.0f;
  std::uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  r.old_bits = bits;
  r.new_bits = bits ^ 0x40000000u;
  r.anchor = 30;
  const std::vector<inject::FlipRecord> recs{r};
  for (bool crash_safe : {true, false})
    for (auto d : {inject::Direction::forward, inject::Direction::revert})
      CHECK_THROWS_AS(inject::apply(file, recs, d, true, crash_safe), CorruptInputError);
  CHECK(ckpt::sha256_file((dir / "one" / "raw.bin").string()) == raw_before);
  CHECK(ckpt::sha256_file(file) == h5_before);

  // A missing raw data file is a missing file (IoError), not a damaged HDF5 file; listing works.
  std::filesystem::remove(dir / "two" / "raw.bin");
  auto f2 = ckpt::h5::open_file((dir / "two" / "ext.h5").string(), ckpt::h5::Mode::read);
  CHECK(ckpt::list_datasets(f2).size() == 2);
  CHECK_THROWS_AS(ckpt::read_tensor(f2, "/ext"), IoError);
}

namespace {

// Records of `flips` faults planned on `file` (every dataset selected).
std::vector<inject::FlipRecord> plan_on(const std::string& file, std::uint64_t flips) {
  auto f = ckpt::h5::open_file(file, ckpt::h5::Mode::read);
  const auto targets = inject::select(ckpt::list_datasets(f), {});
  inject::PlanOptions p;
  p.seed = 5;
  p.flips = flips;
  return inject::plan(file, targets, inject::sample_sites(targets, p), p);
}

ckpt::Tensor ramp(std::size_t n, float base) {
  ckpt::Tensor t(ckpt::DType::f32, {n});
  for (std::size_t i = 0; i < n; ++i) t.as<float>()[i] = base + static_cast<float>(i);
  return t;
}

}  // namespace

TEST_CASE("a failed in-place injection leaves no log of flips never made; one that may hold some keeps it", "[inject][unit]") {
  test::TempDir dir("hostile-txn");
  const auto log = dir / "l.jsonl";
  inject::LogHeader h;
  h.in_place = true;

  // gzip chunks: the edit is staged in a temporary sibling, which cannot be created here (a
  // symbolic link holds its name, as another user could put there; as root a read-only directory
  // would not stop it). Nothing changed, and the link stays.
  const auto g = (dir / "g.h5").string();
  {
    auto f = ckpt::h5::create_file(g);
    ckpt::write_tensor(f, "/model/g", ramp(64, 1.0f), ckpt::WriteOptions{{16}, 4, false});
  }
  const auto g_recs = plan_on(g, 4);
  const auto g_before = ckpt::sha256_file(g);
  CHECK(inject::holds_old_bits(g, g_recs));
  const auto blocker = fs::temp_sibling(std::filesystem::canonical(g));
  std::filesystem::create_directories(dir / "elsewhere");
  std::filesystem::create_directory_symlink(dir / "elsewhere", blocker);
  try {
    inject::apply_logged(log, h, g_recs, g);
    FAIL("the staged edit was not refused");
  } catch (const IoError& e) {
    const std::string what = e.what();
    CHECK(what.find(g + ": its staged copy " + blocker.string() + ": cannot write: the name " + blocker.filename().string() +
                    " in its directory is taken by a symbolic link") == 0);  // not "g.h5: cannot create"
  }
  CHECK_FALSE(std::filesystem::exists(log));
  CHECK(ckpt::sha256_file(g) == g_before);
  CHECK(std::filesystem::is_symlink(blocker));
  CHECK(std::filesystem::is_empty(dir / "elsewhere"));
  std::filesystem::remove(blocker);

  // Words changed in place, then a mismatch in a later dataset: the log is the undo record.
  const auto c = (dir / "c.h5").string(), d = (dir / "d.h5").string();
  for (const auto& [file, z] : {std::pair{c, 100.0f}, std::pair{d, 500.0f}}) {
    auto f = ckpt::h5::create_file(file);
    ckpt::write_tensor(f, "/model/a", ramp(64, 1.0f));
    ckpt::write_tensor(f, "/model/z", ramp(64, z));
  }
  const auto recs = plan_on(c, 40);
  std::set<std::string> hit;
  for (const auto& r : recs) hit.insert(r.dataset);
  REQUIRE(hit == std::set<std::string>{"/model/a", "/model/z"});
  try {
    inject::apply_logged(log, h, recs, d);  // d: /model/a as planned, /model/z other values
    FAIL("the mismatch was not refused");
  } catch (const MismatchError& e) {
    CHECK(std::string(e.what()).find("the flip log " + log.string() + " is kept") != std::string::npos);
  }
  CHECK(std::filesystem::exists(log));
  CHECK_FALSE(inject::holds_old_bits(d, recs));

  // holds_old_bits: before, after and after the undo of an injection.
  CHECK(inject::holds_old_bits(c, recs));
  inject::apply_logged(log, h, recs, c);
  CHECK_FALSE(inject::holds_old_bits(c, recs));
  inject::apply(c, recs, inject::Direction::revert);
  CHECK(inject::holds_old_bits(c, recs));
}
