#include <catch2/catch.hpp>

#include <fstream>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/h5.hpp"
#include "resil_test/tmpdir.hpp"

using namespace resil::ckpt;
using resil::test::TempDir;
namespace stdfs = std::filesystem;

namespace {
Checkpoint tiny() {
  Checkpoint c;
  const std::vector<float> w{1, 2, 3, 4};
  c.model["w"] = Tensor::from<float>({2, 2}, std::span<const float>(w));
  return c;
}
template <class E> void check_throws_naming(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    FAIL("no exception thrown");
  } catch (const E& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
  }
}
}  // namespace

TEST_CASE("bad inputs raise typed errors naming the file or dataset", "[ckpt][unit]") {
  TempDir dir;
  const auto good = save(dir / "good.h5", tiny());

  SECTION("missing file") {
    check_throws_naming<resil::IoError>([&] { read(dir / "nope.h5"); }, "nope.h5");
    CHECK(resil::IoError("x").exit_code() == resil::ExitCode::io);
  }
  SECTION("not HDF5") {
    std::ofstream(dir / "text.h5") << "this is not an HDF5 file\n";
    check_throws_naming<resil::CorruptInputError>([&] { read(dir / "text.h5"); }, "text.h5");
  }
  SECTION("truncated HDF5") {
    const auto size = stdfs::file_size(good);
    for (const auto keep : {std::uintmax_t{0}, std::uintmax_t{100}, size / 2, size - 1}) {
      stdfs::copy_file(good, dir / "trunc.h5", stdfs::copy_options::overwrite_existing);
      stdfs::resize_file(dir / "trunc.h5", keep);
      CAPTURE(keep);
      CHECK_THROWS_AS(read(dir / "trunc.h5", true), resil::Error);
      CHECK_THROWS_AS(verify((dir / "trunc.h5").string()), resil::Error);
    }
  }
  SECTION("a directory instead of a file") {
    check_throws_naming<resil::IoError>([&] { read(dir.path()); }, dir.path().string());
  }
  SECTION("unsupported dtypes: compound, string, vlen") {
    const auto p = (dir / "odd.h5").string();
    {
      h5::File f = h5::create_file(p);
      hsize_t n = 2;
      h5::Dataspace sp(H5Screate_simple(1, &n, nullptr));
      h5::Datatype ct(H5Tcreate(H5T_COMPOUND, 8));
      H5Tinsert(ct, "a", 0, H5T_NATIVE_FLOAT);
      H5Tinsert(ct, "b", 4, H5T_NATIVE_FLOAT);
      h5::Dataset d1(H5Dcreate2(f, "/compound", ct, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      h5::Datatype st(H5Tcopy(H5T_C_S1));
      H5Tset_size(st, 8);
      h5::Dataset d2(H5Dcreate2(f, "/string", st, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      h5::Datatype vt(H5Tvlen_create(H5T_NATIVE_INT));
      h5::Dataset d3(H5Dcreate2(f, "/vlen", vt, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    }
    h5::File f = h5::open_file(p, h5::Mode::read);
    for (const char* name : {"/compound", "/string", "/vlen"}) {
      check_throws_naming<resil::CorruptInputError>([&] { read_tensor(f, name, p); }, name);
    }
    CHECK(describe_dataset(f, "/compound").type_desc == "compound");
    CHECK_FALSE(describe_dataset(f, "/vlen").dtype.has_value());
    check_throws_naming<resil::CorruptInputError>([&] { read_tensor(f, "/missing", p); }, "/missing");
  }
  SECTION("shape or dtype mismatch on load") {
    h5::File f = h5::open_file(good.string(), h5::Mode::read);
    check_throws_naming<resil::MismatchError>([&] { read_tensor_as(f, "/model/w", DType::f32, {4}, good.string()); }, "/model/w");
    check_throws_naming<resil::MismatchError>([&] { read_tensor_as(f, "/model/w", DType::f64, {2, 2}, good.string()); }, "f64");
  }
  SECTION("a checkpoint without /meta is not ours") {
    const auto p = (dir / "foreign.h5").string();
    {
      h5::File f = h5::create_file(p);
      write_tensor(f, "/model/w", tiny().model.at("w"));
    }
    check_throws_naming<resil::CorruptInputError>([&] { read(p); }, "/meta");
  }
  SECTION("a /meta that does not open as a group is corrupt input (4), not an I/O error") {
    const auto p = (dir / "metaset.h5").string();
    {
      h5::File f = h5::create_file(p);
      write_tensor(f, "/meta", tiny().model.at("w"));
    }
    check_throws_naming<resil::CorruptInputError>([&] { read(p); }, "/meta cannot be opened as a group");
    // A damaged /meta object header (its size field points past the end of the file), as in
    // fuzzed files: the same, and HDF5 prints nothing of its own at exit. Not under
    // AddressSanitizer: HDF5 1.10 itself keeps a free-list block when loading the damaged header
    // fails and never frees it (LeakSanitizer reports it at exit; no handle of ours is open). The
    // normal build runs it, and ckpt-train on such a file in train_hostile_meta_damaged_hdf5.
#if !defined(__SANITIZE_ADDRESS__)
    stdfs::copy_file(good, dir / "damaged.h5");
    haddr_t addr = 0;
    {
      h5::File f = h5::open_file((dir / "damaged.h5").string(), h5::Mode::read);
      H5O_info_t info;
      REQUIRE(H5Oget_info_by_name2(f, "/meta", &info, H5O_INFO_BASIC, H5P_DEFAULT) >= 0);
      addr = info.addr;
    }
    {
      std::fstream d(dir / "damaged.h5", std::ios::binary | std::ios::in | std::ios::out);
      d.seekp(static_cast<std::streamoff>(addr + 11));
      d.put('\x7e');
    }
    try {
      read(dir / "damaged.h5");
      FAIL("no error");
    } catch (const resil::Error& e) {
      CHECK(e.exit_code() == resil::ExitCode::corrupt_input);
      CHECK_THAT(e.what(), Catch::Contains("damaged.h5: /meta cannot be opened as a group"));
    }
    H5E_auto2_t func = nullptr;
    void* data = nullptr;
    H5Eget_auto2(H5E_DEFAULT, &func, &data);
    CHECK(func == nullptr);  // "HDF5: infinite loop closing library" is printed only while it is set
#endif
  }
  SECTION("integer attributes are read as stored, never clamped or truncated") {
    const auto p = (dir / "attrs.h5").string();
    {
      h5::File f = h5::create_file(p);
      h5::write_attr_i64(f, "neg", -64);
      h5::write_attr_u64(f, "huge", ~std::uint64_t{0});
      h5::write_attr_f64(f, "half", 8.5);
      h5::write_attr_i64(f, "ok", 7);
      hsize_t n = 2;
      h5::Dataspace sp(H5Screate_simple(1, &n, nullptr));
      const std::int64_t two[2] = {1, 2};
      h5::Attribute a(H5Acreate2(f, "pair", H5T_NATIVE_INT64, sp, H5P_DEFAULT, H5P_DEFAULT));
      H5Awrite(a, H5T_NATIVE_INT64, two);
    }
    h5::File f = h5::open_file(p, h5::Mode::read);
    check_throws_naming<resil::CorruptInputError>([&] { h5::read_attr_u64(f, "neg"); }, "'neg' = -64 is negative");
    check_throws_naming<resil::CorruptInputError>([&] { h5::read_attr_i64(f, "huge"); }, "'huge' = 18446744073709551615 is beyond 2^63-1");
    check_throws_naming<resil::CorruptInputError>([&] { h5::read_attr_i64(f, "half"); }, "'half' is not an integer");
    check_throws_naming<resil::CorruptInputError>([&] { h5::read_attr_u64(f, "pair"); }, "'pair' is not a single value");
    CHECK(h5::read_attr_i64(f, "neg") == -64);
    CHECK(h5::read_attr_u64(f, "huge") == ~std::uint64_t{0});
    CHECK(h5::read_attr_u64(f, "ok") == 7);
  }
  SECTION("a manifest newer than this reader is refused, as a /meta is") {
    std::ofstream(dir / "v99.manifest.json")
        << R"({"format_version": 99, "step": 4, "epoch": 1, "world_size": 1, "mode": "mp", "model": "mlp", "shards": ["s/rank-0.h5"]})";
    check_throws_naming<resil::CorruptInputError>([&] { read_manifest(dir / "v99.manifest.json"); }, "format version 99 is newer");
  }
  SECTION("malformed manifest") {
    std::ofstream(dir / "bad.manifest.json") << "{\"step\": 3,";
    check_throws_naming<resil::CorruptInputError>([&] { read_manifest(dir / "bad.manifest.json"); }, "bad.manifest.json");
  }
  SECTION("a manifest's shards lie below its directory, each once") {
    // A campaign copies, flips and removes the shards a manifest names: "/abs" or "../x" reached
    // (and removed) a user's file outside the checkpoint.
    auto manifest = [&](const std::string& a, const std::string& b) {
      std::ofstream(dir / "m.manifest.json") << R"({"format_version": 1, "step": 4, "epoch": 1, "world_size": 2, "mode": "mp", "model": "mlp", "shards": [")"
                                             << a << R"(", ")" << b << R"("]})";
      return dir / "m.manifest.json";
    };
    for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{
             {"s/rank-0.h5", "/tmp/victim.h5"}, {"s/rank-0.h5", "../victim.h5"}, {"s/rank-0.h5", "s/../../victim.h5"},
             {"s/rank-0.h5", "s/rank-0.h5"}, {"s/rank-0.h5", "./s/rank-0.h5"}, {"s/rank-0.h5", ""}}) {
      INFO(a << " " << b);
      check_throws_naming<resil::CorruptInputError>([&] { read_manifest(manifest(a, b)); }, "m.manifest.json");
    }
    CHECK(read_manifest(manifest("s/rank-0.h5", "s/rank-1.h5")).shards.size() == 2);
    // One file under two names (through a linked directory): it would count twice in a fault space.
    std::filesystem::create_directories(dir / "s");
    std::ofstream(dir / "s" / "rank-0.h5") << "x";
    std::filesystem::create_directory_symlink("s", dir / "alias");
    check_throws_naming<resil::CorruptInputError>([&] { read_manifest(manifest("s/rank-0.h5", "alias/rank-0.h5")); }, "are the same file");
  }
  SECTION("saving into a missing directory fails cleanly and leaves nothing behind") {
    CHECK_THROWS_AS(save(dir / "no" / "such" / "dir.h5", tiny()), resil::IoError);
    CHECK_FALSE(stdfs::exists(dir / "no"));
  }
  SECTION("a failing save leaves no temporary and no marker") {
    // An invalid write option makes write() throw after the temporary was created.
    CHECK_THROWS_AS(save(dir / "opt.h5", tiny(), {.chunks = {1, 1, 1}}), resil::UsageError);
    for (const auto& e : stdfs::directory_iterator(dir.path())) {
      const auto name = e.path().filename().string();
      CHECK((name == "good.h5" || name == "good.h5.done"));
    }
  }
  CHECK(h5::open_object_count() == 0);
}
