#include <catch2/catch.hpp>

#include <fstream>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/config.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/h5.hpp"
#include "resil_test/tmpdir.hpp"

using namespace resil::ckpt;
using resil::test::TempDir;
namespace stdfs = std::filesystem;

namespace {
Checkpoint sample(std::int64_t step, int rank = 0) {
  Checkpoint c;
  c.meta.step = step;
  c.meta.epoch = step / 10;
  c.meta.world_size = 4;
  c.meta.rank = rank;
  c.meta.mode = ParallelMode::mp;
  c.meta.stage_layout = "[[0,2],[2,4],[4,6],[6,8]]";
  c.meta.model = "mlp";
  c.meta.config = R"({"lr":0.1})";
  c.meta.seed = 0xfeedbeefcafef00dull;
  c.meta.rng_state = {1, 2, 3, std::uint64_t(step)};
  c.meta.data_cursor = 1234;
  std::vector<float> w(12);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.5f + static_cast<float>(step);
  c.model["fc1.weight"] = Tensor::from<float>({3, 4}, std::span<const float>(w));
  c.model["fc1.bias"] = Tensor::from<float>({3}, std::span<const float>(w.data(), 3));
  c.optimizer["fc1.weight"]["exp_avg"] = Tensor::from<float>({3, 4}, std::span<const float>(w));
  c.optimizer["fc1.weight"]["exp_avg_sq"] = Tensor::from<float>({3, 4}, std::span<const float>(w));
  const std::vector<std::int64_t> st{step};
  c.optimizer["fc1.weight"]["step"] = Tensor::from<std::int64_t>({}, std::span<const std::int64_t>(st));
  return c;
}

void write_marker_less_file(const stdfs::path& p) {
  h5::File f = h5::create_file(p.string());
  write(f, sample(999));
}
}  // namespace

TEST_CASE("checkpoint schema round-trips model, optimizer and meta", "[ckpt][unit]") {
  TempDir dir;
  const Checkpoint c = sample(42, 2);
  const auto p = save(dir / file_name_for_step(42), c);
  CHECK(p.filename() == "ckpt-step00000042.h5");
  CHECK(is_committed(p));
  const Checkpoint r = read(p, /*verify_checksums=*/true);
  CHECK(r.model == c.model);
  CHECK(r.optimizer == c.optimizer);
  CHECK(r.meta.step == 42);
  CHECK(r.meta.epoch == 4);
  CHECK(r.meta.world_size == 4);
  CHECK(r.meta.rank == 2);
  CHECK(r.meta.mode == ParallelMode::mp);
  CHECK(r.meta.stage_layout == c.meta.stage_layout);
  CHECK(r.meta.model == "mlp");
  CHECK(r.meta.config == c.meta.config);
  CHECK(r.meta.seed == c.meta.seed);
  CHECK(r.meta.rng_state == c.meta.rng_state);
  CHECK(r.meta.data_cursor == 1234);
  CHECK(r.meta.program_version == resil::version);
  CHECK(r.meta.format_version == format_version);
  CHECK(h5::open_object_count() == 0);
}

TEST_CASE("latest picks the newest committed checkpoint and ignores partial ones", "[ckpt][unit]") {
  TempDir dir;
  CHECK_FALSE(latest(dir.path()).has_value());
  save(dir / file_name_for_step(10), sample(10));
  save(dir / file_name_for_step(20), sample(20));
  CHECK(latest(dir.path()) == dir / "ckpt-step00000020.h5");

  SECTION("a file without its commit marker is never picked") {
    write_marker_less_file(dir / file_name_for_step(30));
    CHECK(latest(dir.path()) == dir / "ckpt-step00000020.h5");
  }
  SECTION("a temporary of an interrupted save is never picked") {
    write_marker_less_file(fs::temp_sibling(dir / file_name_for_step(40)));
    CHECK(latest(dir.path()) == dir / "ckpt-step00000020.h5");
  }
  SECTION("a marker whose recorded size disagrees with the file is not trusted") {
    save(dir / file_name_for_step(50), sample(50));
    std::ofstream(dir / "ckpt-step00000050.h5", std::ios::app) << "garbage";
    CHECK_FALSE(is_committed(dir / "ckpt-step00000050.h5"));
    CHECK(latest(dir.path()) == dir / "ckpt-step00000020.h5");
  }
  SECTION("re-saving the same name replaces file and marker") {
    save(dir / file_name_for_step(20), sample(21));
    CHECK(read_meta(dir / "ckpt-step00000020.h5").step == 21);
    CHECK(latest(dir.path()) == dir / "ckpt-step00000020.h5");
  }
}

TEST_CASE("sharded checkpoints commit through their manifest", "[ckpt][unit]") {
  TempDir dir;
  const int world = 3;
  Manifest m;
  m.step = 7;
  m.epoch = 1;
  m.world_size = world;
  m.model = "mlp";
  for (int r = 0; r < world; ++r) {
    const auto p = shard_path(dir.path(), 7, r);
    stdfs::create_directories(p.parent_path());
    save(p, sample(7, r));
    m.shards.push_back(stdfs::relative(p, dir.path()));
  }
  const auto mp = manifest_path(dir.path(), 7);
  CHECK(mp.filename() == "ckpt-step00000007.manifest.json");
  write_manifest(mp, m);
  CHECK(manifest_complete(mp));
  CHECK(latest(dir.path()) == mp);
  const Manifest back = read_manifest(mp);
  CHECK(back.shards == m.shards);
  CHECK(back.mode == ParallelMode::mp);
  CHECK(read(dir.path() / back.shards[2]).meta.rank == 2);

  SECTION("a manifest whose shard lost its marker is incomplete") {
    save(dir / file_name_for_step(5), sample(5));
    stdfs::remove(shard_path(dir.path(), 7, 1).string() + ".done");
    CHECK_FALSE(manifest_complete(mp));
    CHECK(latest(dir.path()) == dir / "ckpt-step00000005.h5");
  }
}

TEST_CASE("a tp slice maps local elements to the global tensor and round-trips through the file", "[ckpt][unit]") {
  // Rank 1 of 2 of a 6 x 2 q/k/v weight: rows 1, 3 and 5 (one row of each of q, k, v).
  TpSlice s;
  s.global_shape = {6, 2};
  s.dim = 0;
  s.ranges = {{1, 2}, {3, 4}, {5, 6}};
  CHECK(s.local_shape() == Shape{3, 2});
  CHECK(s.global_index(0) == 2);  // local (0, 0) = global (1, 0)
  CHECK(s.global_index(3) == 7);  // local (1, 1) = global (3, 1)
  CHECK(s.global_index(5) == 11);
  // A column slice (a row-parallel weight): columns 2..3 of a 2 x 4 tensor.
  TpSlice c{{2, 4}, 1, {{2, 4}}};
  CHECK(c.global_index(1) == 3);
  CHECK(c.global_index(2) == 6);
  const std::vector<float> local = {1, 2, 3, 4};
  Tensor g = Tensor::from<float>({2, 4}, std::span<const float>(std::vector<float>(8, 0.0f)));
  c.place(Tensor::from<float>({2, 2}, std::span<const float>(local)), g);
  CHECK(std::vector<float>(g.as<float>().begin(), g.as<float>().end()) == std::vector<float>{0, 0, 1, 2, 0, 0, 3, 4});
  CHECK(TpSlice::from_json(s.to_json(), "x").ranges == s.ranges);
  CHECK_THROWS_AS(TpSlice::from_json(R"({"global_shape":[4],"dim":0,"ranges":[[3,5]]})", "x"), resil::CorruptInputError);
  // Overlapping ranges would map two local elements to one global one.
  CHECK_THROWS_AS(TpSlice::from_json(R"({"global_shape":[24],"dim":0,"ranges":[[0,16],[8,24]]})", "x"), resil::CorruptInputError);

  TempDir tmp;
  Checkpoint ck = sample(5);
  ck.model["fc1.weight"] = Tensor::from<float>({3, 2}, std::span<const float>(std::vector<float>(6, 1.0f)));
  ck.optimizer["fc1.weight"]["exp_avg"] = Tensor::from<float>({3, 2}, std::span<const float>(std::vector<float>(6, 1.0f)));
  ck.optimizer["fc1.weight"]["exp_avg_sq"] = Tensor::from<float>({3, 2}, std::span<const float>(std::vector<float>(6, 1.0f)));
  ck.slices["fc1.weight"] = s.to_json();
  const auto p = save(tmp / "tp.h5", ck);
  const Checkpoint back = read(p);
  CHECK(back.slices == ck.slices);
  h5::File f = h5::open_file(p.string(), h5::Mode::read);
  h5::Dataset d = h5::open_dataset(f, "/optimizer/fc1.weight/exp_avg", "");
  CHECK(h5::read_attr_str(d, tp_slice_attr) == s.to_json());
}
