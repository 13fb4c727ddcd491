#include <catch2/catch.hpp>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/h5.hpp"
#include "resil_test/tmpdir.hpp"

using namespace resil::ckpt;
using namespace resil::test;

TEST_CASE("reads a PyTorch/Keras-style file written by h5py", "[ckpt][integration]") {
  TempDir dir;
  const auto p = (dir / "torch.h5").string();
  REQUIRE(run(python() + " " + (source_dir() / "tests/ckpt/h5py_write_state_dict.py").string() + " " + p) == 0);
  h5::File f = h5::open_file(p, h5::Mode::read);
  const auto infos = list_datasets(f);
  REQUIRE(infos.size() == 6);

  const Tensor w = read_tensor(f, "/model/fc1.weight", p);
  REQUIRE(w.dtype() == DType::f32);
  REQUIRE(w.shape() == Shape{3, 4});
  for (int i = 0; i < 12; ++i) CHECK(w.as<float>()[i] == static_cast<float>(i) * 0.25f);

  const Tensor b = read_tensor(f, "/model/fc1.bias", p);
  CHECK(b.as<float>()[2] == 1.0f);
  const DatasetInfo bi = describe_dataset(f, "/model/fc1.bias");
  CHECK(bi.layout == Layout::chunked);
  CHECK(bi.filters == std::vector<std::string>{"shuffle", "deflate(4)"});
  CHECK_FALSE(bi.checksum.has_value());

  const Tensor c = read_tensor(f, "/model/conv.weight", p);
  CHECK(c.dtype() == DType::f64);
  CHECK(c.shape() == Shape{2, 3, 2, 2, 2});
  CHECK(c.as<double>()[47] == 47.0);

  const Tensor h = read_tensor(f, "/model/half", p);
  CHECK(h.dtype() == DType::f16);
  CHECK(word_to_double(DType::f16, h.as<std::uint16_t>()[1]) == -2.0);

  const Tensor n = read_tensor(f, "/model/bn.num_batches_tracked", p);
  CHECK(n.dtype() == DType::i64);
  CHECK(n.rank() == 0);
  CHECK(n.as<std::int64_t>()[0] == 17);

  CHECK(read_tensor(f, "/model_weights/dense/dense/kernel:0", p).as<float>()[3] == 1.0f);
  const VerifyReport r = verify(p);
  CHECK(r.ok());
  CHECK(r.unchecked.size() == 6);
}

TEST_CASE("h5py reads a checkpoint written by resil", "[ckpt][integration]") {
  TempDir dir;
  Checkpoint c;
  std::vector<float> w(12);
  for (int i = 0; i < 12; ++i) w[static_cast<std::size_t>(i)] = static_cast<float>(i) * 0.5f;
  c.model["fc1.weight"] = Tensor::from<float>({3, 4}, std::span<const float>(w));
  Tensor half(DType::f16, {3}), bf(DType::bf16, {2});
  const double hv[] = {1.0, -2.0, 0.5}, bv[] = {1.0, -2.5};
  for (int i = 0; i < 3; ++i) half.as<std::uint16_t>()[i] = static_cast<std::uint16_t>(double_to_word(DType::f16, hv[i]));
  for (int i = 0; i < 2; ++i) bf.as<std::uint16_t>()[i] = static_cast<std::uint16_t>(double_to_word(DType::bf16, bv[i]));
  c.model["half"] = std::move(half);
  c.model["bf"] = std::move(bf);
  std::vector<std::int32_t> five(12);
  for (int i = 0; i < 12; ++i) five[static_cast<std::size_t>(i)] = i;
  c.model["five"] = Tensor::from<std::int32_t>({1, 2, 1, 2, 3}, std::span<const std::int32_t>(five));
  c.optimizer["fc1.weight"]["momentum"] = Tensor(DType::f32, {3, 4});
  c.meta.step = 5;
  c.meta.epoch = 1;
  c.meta.model = "mlp";
  c.meta.rng_state = {11, 22};
  const auto p = save(dir / file_name_for_step(5), c, {});
  CHECK(run(python() + " " + (source_dir() / "tests/ckpt/h5py_check_resil.py").string() + " " + p.string()) == 0);
}
