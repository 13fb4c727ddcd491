// Interval math, sample sizes and stratified estimates against known values (R binom.test /
// scipy.stats, hand computations), plus the campaign classifier and two-level FIT arithmetic.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "resil/core/error.hpp"
#include "resil/campaign/campaign.hpp"
#include "resil/inject/fault_model.hpp"
#include "resil/campaign/fit.hpp"
#include "resil/campaign/stats.hpp"

using namespace resil::inject;
using Catch::Detail::Approx;

TEST_CASE("normal quantile", "[stats][unit]") {
  CHECK(normal_quantile(0.975) == Approx(1.959963984540054).epsilon(1e-12));
  CHECK(normal_quantile(0.5) == Approx(0.0).margin(1e-15));
  CHECK(normal_quantile(0.005) == Approx(-2.575829303548901).epsilon(1e-12));
  CHECK(normal_quantile(1e-10) == Approx(-6.361340902404056).epsilon(1e-10));
  CHECK(z_two_sided(0.99) == Approx(2.575829303548901).epsilon(1e-12));
  CHECK_THROWS_AS(normal_quantile(0), resil::UsageError);
  CHECK_THROWS_AS(z_two_sided(1.0), resil::UsageError);
}

TEST_CASE("regularized incomplete beta and its inverse", "[stats][unit]") {
  // Closed forms: I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 - (1 - x)^b.
  CHECK(incomplete_beta(1, 1, 0.3) == Approx(0.3).epsilon(1e-14));
  CHECK(incomplete_beta(3, 1, 0.4) == Approx(std::pow(0.4, 3)).epsilon(1e-13));
  CHECK(incomplete_beta(1, 5, 0.2) == Approx(1 - std::pow(0.8, 5)).epsilon(1e-13));
  // scipy.special.betainc(2, 3, 0.5) = 0.6875.
  CHECK(incomplete_beta(2, 3, 0.5) == Approx(0.6875).epsilon(1e-13));
  // Symmetry I_x(a, b) = 1 - I_{1-x}(b, a), across the branch switch.
  for (double x : {0.01, 0.2, 0.5, 0.77, 0.99})
    CHECK(incomplete_beta(7.5, 2.25, x) == Approx(1 - incomplete_beta(2.25, 7.5, 1 - x)).epsilon(1e-12).margin(1e-15));
  for (double p : {1e-6, 0.025, 0.5, 0.975, 1 - 1e-6}) {
    const double x = inverse_incomplete_beta(5, 16, p);
    CHECK(incomplete_beta(5, 16, x) == Approx(p).epsilon(1e-10));
  }
}

TEST_CASE("Wilson and Clopper-Pearson intervals against R/scipy", "[stats][unit]") {
  // R: binom.test(5, 20)$conf.int = 0.08657147 0.49104587; Wilson: scipy.stats.binomtest(5, 20)
  // .proportion_ci(method="wilson") = 0.1118617014, 0.4687008776 (to 4 digits, as docs/design/campaigns.md quotes them: [0.1119, 0.4687]).
  const auto cp = clopper_pearson_interval(5, 20, 0.95);
  CHECK(cp.lo == Approx(0.08657147).epsilon(1e-6));
  CHECK(cp.hi == Approx(0.49104587).epsilon(1e-6));
  const auto w = wilson_interval(5, 20, 0.95);
  CHECK(w.lo == Approx(0.1118617014).epsilon(1e-8));
  CHECK(w.hi == Approx(0.4687008776).epsilon(1e-8));
  // Edges: x = 0 -> [0, 1 - (alpha/2)^(1/n)]; x = n -> [(alpha/2)^(1/n), 1].
  const auto z = clopper_pearson_interval(0, 10, 0.95);
  CHECK(z.lo == 0);
  CHECK(z.hi == Approx(1 - std::pow(0.025, 0.1)).epsilon(1e-9));  // 0.3084971
  const auto f = clopper_pearson_interval(10, 10, 0.95);
  CHECK(f.lo == Approx(std::pow(0.025, 0.1)).epsilon(1e-9));
  CHECK(f.hi == 1);
  // R: binom.test(1, 1000)$conf.int = 2.531749e-05 5.558924e-03.
  const auto r = clopper_pearson_interval(1, 1000, 0.95);
  CHECK(r.lo == Approx(2.531749e-05).epsilon(1e-5));
  CHECK(r.hi == Approx(5.558924e-03).epsilon(1e-5));
  // 99%: scipy.stats.beta.ppf(0.005, 5, 16) = 0.0583339361, beta.ppf(0.995, 6, 15) = 0.5597609078.
  const auto c99 = clopper_pearson_interval(5, 20, 0.99);
  CHECK(c99.lo == Approx(0.0583339361).epsilon(1e-8));
  CHECK(c99.hi == Approx(0.5597609078).epsilon(1e-8));
  const auto none = wilson_interval(0, 0, 0.95);
  CHECK((none.lo == 0 && none.hi == 1));
  const auto rr = rate(5, 20, 0.95);
  CHECK(rr.p == 0.25);
  CHECK((rr.wilson.lo > rr.clopper_pearson.lo && rr.wilson.hi < rr.clopper_pearson.hi));
}

TEST_CASE("Leveugle sample size", "[stats][unit]") {
  // Infinite-population limit t^2 p (1-p) / e^2 = 1.959964^2 * 0.25 / 1e-4 = 9603.6.
  CHECK(leveugle_sample_size(1e15, 0.01, 0.95) == Approx(9603.65).epsilon(1e-4));
  // N = 10000, e = 5%, 95%: 10000 / (1 + 0.0025 * 9999 / 0.960365) = 369.98.
  CHECK(leveugle_sample_size(10000, 0.05, 0.95) == Approx(369.98).epsilon(1e-4));
  // Smaller than the population, and the whole population when e -> tiny.
  CHECK(leveugle_sample_size(100, 1e-6, 0.95) == Approx(100).epsilon(1e-6));
  // p = 0.1 needs fewer trials than the worst case.
  CHECK(leveugle_sample_size(1e9, 0.01, 0.95, 0.1) < leveugle_sample_size(1e9, 0.01, 0.95, 0.5));
  CHECK_THROWS_AS(leveugle_sample_size(0, 0.01, 0.95), resil::UsageError);
  CHECK_THROWS_AS(leveugle_sample_size(100, 0, 0.95), resil::UsageError);
}

TEST_CASE("stratified estimates reweight by stratum size", "[stats][unit]") {
  // Exponent bits: 8 of 32 of the space, sampled 50 times with 40 hits; the other 24 bits 50 times, 1 hit.
  // Unweighted 41/100 = 0.41; reweighted 0.25 * 0.8 + 0.75 * 0.02 = 0.215.
  const StratumCount s[] = {{8, 40, 50}, {24, 1, 50}};
  const auto r = stratified_rate(s, 0.95);
  CHECK(r.p == Approx(0.215).epsilon(1e-12));
  CHECK(r.variance == Approx(0.0625 * 0.8 * 0.2 / 50 + 0.5625 * 0.02 * 0.98 / 50).epsilon(1e-12));
  CHECK(r.coverage == 1.0);
  CHECK((r.wilson.lo < 0.215 && r.wilson.hi > 0.215 && r.clopper_pearson.lo < 0.215 && r.clopper_pearson.hi > 0.215));
  // Proportional allocation equals the plain estimate and its intervals.
  const StratumCount prop[] = {{1, 3, 10}, {3, 9, 30}};
  const auto q = stratified_rate(prop, 0.95);
  CHECK(q.p == Approx(0.3).epsilon(1e-12));
  // An unsampled stratum is outside the coverage and outside the weights.
  const StratumCount part[] = {{1, 5, 10}, {3, 0, 0}};
  const auto u = stratified_rate(part, 0.95);
  CHECK(u.coverage == Approx(0.25));
  CHECK(u.p == Approx(0.5));
  // All zero: variance 0, n_eff = n, CP upper bound as for 0 of 20.
  const StratumCount zero[] = {{1, 0, 10}, {1, 0, 10}};
  const auto z = stratified_rate(zero, 0.95);
  CHECK(z.p == 0);
  CHECK(z.clopper_pearson.hi == Approx(clopper_pearson_interval(0, 20, 0.95).hi));
}

TEST_CASE("classification of command results", "[campaign][unit]") {
  CampaignConfig c;
  c.metric = "test_accuracy";
  c.tolerance = 0.01;
  c.timeout_s = 1;
  Golden g;
  g.metric = 0.8;
  g.final_weights = "00000000000000aa";
  auto run = [](int code, nlohmann::json s = nullptr) {
    CommandResult r;
    r.exit_code = code;
    if (!s.is_null()) r.summary = s;
    return r;
  };
  CommandResult hang;
  hang.timed_out = true;
  CHECK(classify(c, g, hang, false, {}).outcome == Outcome::hang);
  CHECK(classify(c, g, hang, false, {}).note == "no exit within 1 s; process group killed");  // the timeout as written
  c.timeout_s = 0.25;
  CHECK(classify(c, g, hang, false, {}).note == "no exit within 0.25 s; process group killed");
  c.timeout_s = 1;
  CommandResult sig;
  sig.signal = 11;
  CHECK(classify(c, g, sig, false, {}).outcome == Outcome::crash);
  CHECK(classify(c, g, run(4), false, {}).outcome == Outcome::load_failure);
  CHECK(classify(c, g, run(7), false, {}).outcome == Outcome::load_failure);
  CHECK(classify(c, g, run(6), true, {}).outcome == Outcome::nan_at_load);
  CHECK(classify(c, g, run(6), false, {}).outcome == Outcome::nan_later);
  CHECK(classify(c, g, run(0, {{"test_accuracy", nullptr}}), false, {}).outcome == Outcome::nan_later);
  CHECK(classify(c, g, run(0, {{"test_accuracy", 0.5}, {"nan_detected", true}}), true, {}).outcome == Outcome::nan_at_load);
  CHECK(classify(c, g, run(3), false, {}).outcome == Outcome::crash);
  // Exit 0 without a summary the campaign can read: its own class, the note saying why.
  CHECK(classify(c, g, run(0), false, {}).outcome == Outcome::unreadable_summary);  // no summary
  CommandResult garbled = run(0);
  garbled.summary_problem = "{out} is not JSON: syntax error";
  CHECK(classify(c, g, garbled, false, {}).note == "{out} is not JSON: syntax error");
  CHECK(classify(c, g, run(0, {{"loss", 1}}), false, {}).outcome == Outcome::unreadable_summary);
  CHECK(classify(c, g, run(0, {{"loss", 1}}), false, {}).note == "the summary has no \"test_accuracy\"");
  CHECK(classify(c, g, run(0, {{"test_accuracy", "0.8"}}), false, {}).outcome == Outcome::unreadable_summary);
  CHECK(classify(c, g, run(0, nlohmann::json::array({0.8})), false, {}).outcome == Outcome::unreadable_summary);
  CHECK(classify(c, g, run(3), false, {}).outcome == Outcome::crash);  // a failed command stays a crash, summary or not
  // Non-finite metrics (Python's json writes NaN, Infinity, -Infinity): the NaN classes.
  for (double v : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    CHECK(classify(c, g, run(0, {{"test_accuracy", v}}), false, {}).outcome == Outcome::nan_later);
    CHECK(classify(c, g, run(0, {{"test_accuracy", v}}), true, {}).outcome == Outcome::nan_at_load);
  }
  CHECK(classify(c, g, run(0, {{"test_accuracy", -HUGE_VAL}}), false, {}).note == "test_accuracy is -Infinity");
  CHECK(classify(c, g, run(0, {{"test_accuracy", 0.7}}), false, {}).outcome == Outcome::critical_sdc);
  CHECK(classify(c, g, run(0, {{"test_accuracy", 0.795}}), false, {}).outcome == Outcome::tolerable_sdc);
  CHECK(classify(c, g, run(0, {{"test_accuracy", 0.9}}), false, {}).outcome == Outcome::tolerable_sdc);
  CHECK(classify(c, g, run(0, {{"test_accuracy", 0.8}}), false, {}).outcome == Outcome::masked);
  CHECK(classify(c, g, run(0, {{"test_accuracy", 0.8}}), false, std::string("00000000000000bb")).outcome == Outcome::masked);
  CHECK(classify(c, g, run(0, {{"test_accuracy", 0.8}}), false, std::string("00000000000000aa")).outcome == Outcome::bit_masked);
  c.higher_is_better = false;  // a loss: higher is worse
  CHECK(classify(c, g, run(0, {{"test_accuracy", 0.9}}), false, {}).outcome == Outcome::critical_sdc);
  for (auto o : all_outcomes) CHECK(outcome_from_name(outcome_name(o)) == o);
}

TEST_CASE("summaries as Python's json writes them: NaN, Infinity, -Infinity", "[campaign][unit]") {
  const auto j = parse_summary(R"({"test_accuracy": NaN, "test_loss": Infinity, "low": -Infinity, "n": [1, -2.5e-3, NaN, 7],
      "NaN": "NaN", "s": "a \"NaN\" -Infinity \\", "Infinity": {"x": -Infinity}, "ok": true, "none": null})");
  CHECK(std::isnan(j.at("test_accuracy").get<double>()));
  CHECK(j.at("test_loss").get<double>() == HUGE_VAL);
  CHECK(j.at("low").get<double>() == -HUGE_VAL);
  CHECK(j.at("n").at(0) == 1);
  CHECK(j.at("n").at(1).get<double>() == -2.5e-3);
  CHECK(std::isnan(j.at("n").at(2).get<double>()));
  CHECK(j.at("n").at(3) == 7);
  CHECK(j.at("NaN") == "NaN");  // keys and strings are left as written
  CHECK(j.at("s") == "a \"NaN\" -Infinity \\");
  CHECK(j.at("Infinity").at("x").get<double>() == -HUGE_VAL);
  CHECK(j.at("ok") == true);
  CHECK(j.at("none").is_null());
  CHECK(std::isnan(parse_summary("NaN").get<double>()));
  CHECK(parse_summary(R"({"a": 1.5})") == nlohmann::json::parse(R"({"a": 1.5})"));
  // Anything else that is not JSON stays an error.
  for (const char* bad : {"{\"a\": nan}", "{\"a\": -NaN}", "{\"a\": Inf}", "{\"a\": NaNa}", "{\"a\": 1NaN}", "{\"a\": +1}", "{\"a\": ", "{\"a\": \"NaN}", "x"})
    CHECK_THROWS_AS(parse_summary(bad), nlohmann::json::parse_error);
}

TEST_CASE("campaign configuration parsing", "[campaign][unit]") {
  const auto c = CampaignConfig::parse(R"({"checkpoint": "ck.h5", "command": ["ckpt-train", "eval", "--from", "{ckpt}", "--summary", "{out}"],
      "trials": 12, "seed": 9, "inject": {"flips": 2, "role": "model", "bits": "exponent", "strata": "field"},
      "tolerance": 0.02, "restore": "copy"})", "/cfg/c.json");
  CHECK(c.checkpoint == "/cfg/ck.h5");
  CHECK(c.trials == 12);
  CHECK(c.flips == 2);
  CHECK(c.copies);
  CHECK(c.strata == Strata::field);
  CHECK(CampaignConfig::parse(c.to_json().dump(), "/cfg/c.json").to_json() == c.to_json());
  CHECK_THROWS_AS(CampaignConfig::parse(R"({"command": "x"})", "c.json"), resil::UsageError);
  CHECK_THROWS_AS(CampaignConfig::parse(R"({"checkpoint": "a.h5"})", "c.json"), resil::UsageError);
  CHECK_THROWS_AS(CampaignConfig::parse(R"({"checkpoint": "a.h5", "command": "x", "trails": 3})", "c.json"), resil::UsageError);
  CHECK_THROWS_AS(CampaignConfig::parse(R"({"checkpoint": "a.h5", "command": "x", "inject": {"strata": "colour"}})", "c.json"), resil::UsageError);
  CHECK_THROWS_AS(CampaignConfig::parse("{not json", "c.json"), resil::UsageError);
  CHECK(ShardSpec::parse("3/8").index == 3);
  CHECK_THROWS_AS(ShardSpec::parse("8/8"), resil::UsageError);
  CHECK_THROWS_AS(ShardSpec::parse("1"), resil::UsageError);
  CHECK(substitute({"a{ckpt}b", "{out}", "{x}"}, {{"ckpt", "C"}, {"out", "O{out}"}}) == std::vector<std::string>{"aCb", "O{out}", "{x}"});
  CHECK(field_of("f32", 31) == "sign");
  CHECK(field_of("f32", 23) == "exponent");
  CHECK(field_of("f32", 22) == "mantissa");
  CHECK(field_of("bf16", 7) == "exponent");
  CHECK(field_of("i64", 63) == "integer");
  CHECK(field_of("f8_e4m3", 7) == "sign");
  CHECK(field_of("f8_e4m3", 3) == "exponent");
  CHECK(field_of("f8_e5m2", 2) == "exponent");
  CHECK(field_of("f8_e5m2", 1) == "mantissa");
  CHECK(field_of("bool", 0) == "integer");
}

TEST_CASE("several metrics: masked only when every one held", "[campaign][unit]") {
  const auto c = CampaignConfig::parse(R"({"checkpoint": "m.pt", "command": "x", "metrics": [
      {"name": "test_accuracy", "tolerance": 0.01}, {"name": "test_loss", "tolerance": 0.05, "higher_is_better": false}]})", "/cfg/c.json");
  CHECK(c.metric == "test_accuracy");
  CHECK(c.tolerance == 0.01);
  REQUIRE(c.more_metrics.size() == 1);
  CHECK(c.more_metrics[0] == MetricSpec{"test_loss", false, 0.05});
  CHECK(c.to_json().at("metrics").size() == 2);
  CHECK_FALSE(c.to_json().contains("metric"));  // the configuration as given: parse(to_json()) is the same
  CHECK(CampaignConfig::parse(c.to_json().dump(), "/cfg/c.json").to_json() == c.to_json());
  Golden g;
  g.metric = 0.8;
  g.metrics = {{"test_accuracy", 0.8}, {"test_loss", 0.5}};
  auto run = [](double acc, nlohmann::json loss) {
    CommandResult r;
    r.summary = nlohmann::json{{"test_accuracy", acc}, {"test_loss", loss}};
    return r;
  };
  CHECK(classify(c, g, run(0.8, 0.5), false, {}).outcome == Outcome::masked);
  const auto k = classify(c, g, run(0.8, 0.52), false, {});  // the loss moved, within its tolerance
  CHECK(k.outcome == Outcome::tolerable_sdc);
  CHECK(k.metric == 0.8);
  CHECK(k.metrics.at("test_accuracy").at("verdict") == "masked");
  CHECK(k.metrics.at("test_loss").at("verdict") == "tolerable");
  CHECK(k.metrics.at("test_loss").at("golden") == 0.5);
  CHECK(k.note == "test_loss +0.02 (tolerance 0.05)");
  const auto worse = classify(c, g, run(0.8, 0.9), false, {});  // accuracy held, the loss did not: not masked
  CHECK(worse.outcome == Outcome::critical_sdc);
  CHECK(worse.note == "test_loss +0.4 (tolerance 0.05)");
  CHECK(classify(c, g, run(0.8, 0.3), false, {}).outcome == Outcome::tolerable_sdc);  // lower loss: better, not critical
  CHECK(classify(c, g, run(0.7, 0.5), false, {}).outcome == Outcome::critical_sdc);
  const auto nan = classify(c, g, run(0.8, std::nan("")), false, {});
  CHECK(nan.outcome == Outcome::nan_later);
  CHECK(nan.note == "test_loss is NaN");
  CHECK(nan.metrics.at("test_loss").at("verdict") == "nonfinite");
  CHECK(nan.metrics.at("test_loss").at("value").is_null());
  CHECK(classify(c, g, run(0.8, nullptr), true, {}).outcome == Outcome::nan_at_load);
  CommandResult no_loss;
  no_loss.summary = nlohmann::json{{"test_accuracy", 0.8}};
  CHECK(classify(c, g, no_loss, false, {}).outcome == Outcome::unreadable_summary);
  CHECK(classify(c, g, no_loss, false, {}).note == "the summary has no \"test_loss\"");
  CHECK(classify(c, g, run(0.8, 0.5), false, std::string("aa")).outcome == Outcome::masked);
  g.final_weights = "aa";
  CHECK(classify(c, g, run(0.8, 0.5), false, std::string("aa")).outcome == Outcome::bit_masked);
  // One metric: records and notes as they always were.
  CampaignConfig one = c;
  one.more_metrics.clear();
  CHECK(classify(one, g, run(0.79, 0.9), false, {}).metrics.empty());
  CHECK(classify(one, g, run(0.79, 0.9), false, {}).note.empty());
  // Refused: both forms, an empty list, a name missing, twice or empty, an unknown key, a bad tolerance.
  const std::string head = R"({"checkpoint": "a.h5", "command": "x", )";
  for (const char* bad : {R"("metric": "a", "metrics": [{"name": "b"}])", R"("tolerance": 0.1, "metrics": [{"name": "b"}])", R"("metrics": [])",
                          R"("metrics": {"name": "a"})", R"("metrics": ["a"])", R"("metrics": [{"tolerance": 0.1}])",
                          R"("metrics": [{"name": "a"}, {"name": "a"}])", R"("metrics": [{"name": ""}])", R"("metrics": [{"name": "a", "tol": 1}])",
                          R"("metrics": [{"name": "a", "tolerance": -1}])", R"("metrics": [{"name": "a", "higher_is_better": "yes"}])"}) {
    INFO(bad);
    CHECK_THROWS_WITH(CampaignConfig::parse(head + bad + "}", "c.json"), Catch::Contains("metric"));
  }
}

TEST_CASE("kind ec-train: its keys, defaults, refusals and the detected class", "[campaign][unit]") {
  const std::string cmd = R"("command": ["mpiexec", "-n", "4", "ec-train", "--scrub", "--report", "{out}"])";
  const auto c = CampaignConfig::parse("{\"kind\": \"ec-train\", " + cmd + R"(, "inject": {"targets": ["row", "mlp"], "steps": [3, 8], "flips": 2}})",
                                       "/cfg/c.json");
  CHECK(c.kind == TrialKind::ec_train);
  CHECK(c.targets == std::vector<std::string>{"row", "mlp"});
  CHECK(c.steps == std::pair<std::uint64_t, std::uint64_t>{3, 8});
  CHECK(c.metric == "final_loss");
  CHECK_FALSE(c.higher_is_better);
  CHECK(c.detected_codes == std::vector<int>{8});
  CHECK(c.bits == "all");
  // campaign.json round-trips, names the kind and holds no checkpoint key.
  const auto j = c.to_json();
  CHECK(j.at("kind") == "ec-train");
  CHECK_FALSE(j.contains("checkpoint"));
  CHECK(j.at("inject").at("steps") == nlohmann::json::array({3, 8}));
  CHECK(CampaignConfig::parse(j.dump(), "/cfg/c.json").to_json() == j);
  // Defaults: every target, the steps left to the golden run.
  const auto d = CampaignConfig::parse("{\"kind\": \"ec-train\", " + cmd + "}", "c.json");
  CHECK(d.targets == std::vector<std::string>{"row", "parity", "mlp", "opt"});
  CHECK_FALSE(d.steps);
  auto refused = [&](const std::string& text, const std::string& word) {
    try {
      CampaignConfig::parse(text, "c.json");
      FAIL("accepted: " << text);
    } catch (const resil::UsageError& e) {
      CHECK_THAT(e.what(), Catch::Matchers::Contains(word));
    }
  };
  refused("{\"kind\": \"ec-train\", " + cmd + R"(, "checkpoint": "g.h5"})", "\"checkpoint\": a campaign of kind ec-train");
  refused("{\"kind\": \"ec-train\", " + cmd + R"(, "restore": "copy"})", "unknown key 'restore'");
  refused("{\"kind\": \"ec-train\", " + cmd + R"(, "inject": {"role": "model"}})", "unknown key 'inject.role'");
  refused("{\"kind\": \"ec-train\", " + cmd + R"(, "inject": {"targets": ["row", "row"]}})", "listed twice");
  refused("{\"kind\": \"ec-train\", " + cmd + R"(, "inject": {"targets": []}})", "at least one");
  refused("{\"kind\": \"ec-train\", " + cmd + R"(, "inject": {"steps": [0, 3]}})", "inject.steps.first");
  refused("{\"kind\": \"ec-train\", " + cmd + R"(, "inject": {"steps": [3]}})", "inject.steps must be");
  refused("{\"kind\": \"ec-train\", " + cmd + R"(, "inject": {"flips": 65}})", "inject.flips");
  refused("{\"kind\": \"ec-train\", " + cmd + R"(, "inject": {"bits": "40"}})", "inject.bits");
  refused("{\"kind\": \"ec-train\", " + cmd + R"(, "mode": "worker"})", "mode \"worker\"");
  refused(R"({"kind": "ec-train", "command": "mpiexec ec-train --report {out}"})", "argv array");
  refused(R"({"kind": "ec-train", "command": ["ec-train", "--report", "{ckpt}"]})", "{ckpt}");
  refused(R"({"kind": "ec-train", "command": ["ec-train", "--job-id", "j", "--report", "{out}"]})", "gives --job-id");
  refused(R"({"kind": "ec-train", "command": ["ec-train", "--inject=row@3", "--report", "{out}"]})", "gives --inject");
  refused(R"({"kind": "ec-train", "command": ["ec-train", "--steps", "3"]})", "{out}");
  refused(R"({"kind": "file", "checkpoint": "g.h5", "command": "x"})", "kind must be one of");
  // detected: an exit code of detected_codes, before the NaN codes; in the DUE group.
  CampaignConfig k;
  k.detected_codes = {8};
  Golden g;
  CommandResult r;
  r.exit_code = 8;
  CHECK(classify(k, g, r, false, {}).outcome == Outcome::detected);
  k.detected_codes.clear();
  CHECK(classify(k, g, r, false, {}).outcome == Outcome::crash);
  CHECK(in_outcome_group("due", Outcome::detected));
  // A checkpoint campaign that sets none keeps its campaign.json (no detected_codes key).
  CHECK_FALSE(CampaignConfig::parse(R"({"checkpoint": "a.h5", "command": "x"})", "c.json").to_json().contains("detected_codes"));
}

TEST_CASE("a configuration with one metric keeps the campaign.json it always had", "[campaign][unit]") {
  // The keys of campaign.json's "config" for a configuration that sets none of the later optional
  // keys: a campaign directory written before them compares equal and continues.
  const auto c = CampaignConfig::parse(R"({"checkpoint": "/d/m.h5", "command": ["ckpt-train", "resume", "--from", "{ckpt}"],
      "metric": "test_auc", "tolerance": 0.02, "higher_is_better": false, "inject": {"role": "all"}})", "/cfg/c.json");
  const auto j = c.to_json();
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"checkpoint", "command", "confidence", "higher_is_better", "inject", "load_failure_codes", "metric", "mode",
                                         "name", "nan_codes", "restore", "seed", "timeout_s", "tolerance", "trials", "verify"});
  CHECK(j.at("metric") == "test_auc");
  CHECK(j.at("tolerance") == 0.02);
  CHECK(j.at("higher_is_better") == false);
  Golden g;
  g.metric = 0.5;
  CHECK_FALSE(g.to_json().contains("metrics"));  // golden.json as it always was
  CHECK(Golden::from_json(g.to_json()).metrics.empty());
}

TEST_CASE("the default role fits the trial: model for a trial that only evaluates", "[campaign][unit]") {
  auto role_of_command = [](const std::string& command, const std::string& inject = "{}") {
    return CampaignConfig::parse(R"({"checkpoint": "a.pt", "command": )" + command + R"(, "inject": )" + inject + "}", "c.json");
  };
  CHECK(role_of_command(R"(["ckpt-train", "eval", "--from", "{ckpt}"])").role == Role::model);
  CHECK(role_of_command(R"(["ckpt-train", "eval", "--from", "{ckpt}"])").role_defaulted);
  CHECK(role_of_command(R"(["/usr/bin/python3", "trial.py", "eval", "--from", "{ckpt}"])").role == Role::model);
  CHECK(role_of_command(R"(["./trial.py", "eval"])").role == Role::model);
  CHECK(role_of_command(R"(["python3.11", "trial.py", "resume"])").role == Role::all);
  CHECK(role_of_command(R"(["ckpt-train", "resume", "--from", "{ckpt}"])").role == Role::all);
  CHECK(role_of_command(R"("ckpt-train eval --from {ckpt}")").role == Role::all);  // sh -c: its kind is unknown
  CHECK(role_of_command(R"(["sh", "-c", "eval x"])").role == Role::all);
  CHECK(role_of_command(R"(["ckpt-train", "eval"])", R"({"role": "all"})").role == Role::all);  // as given
  CHECK_FALSE(role_of_command(R"(["ckpt-train", "eval"])", R"({"role": "all"})").role_defaulted);
  CHECK(role_of_command(R"(["ckpt-train", "eval"])").to_json().at("inject").at("role") == "model");
  // Where a command names its subcommand: after the program, or after a Python interpreter only.
  CHECK(trial_subcommand_at({"ckpt-train", "eval"}) == 1);
  CHECK(trial_subcommand_at({"/usr/bin/python3.11", "t.py", "resume"}) == 2);
  CHECK(trial_subcommand_at({"python", "t.py", "eval"}) == 2);
  CHECK(trial_subcommand_at({"python3", "-u", "t.py", "eval"}) == 0);
  CHECK(trial_subcommand_at({"pythonista", "t.py", "eval"}) == 0);
  CHECK(trial_subcommand_at({"mpiexec", "ckpt-train", "eval"}) == 0);
  CHECK(trial_subcommand_at({"ckpt-train eval"}) == 0);
  CHECK(trial_only_evaluates({"python3", "t.py", "eval"}));
  CHECK_FALSE(trial_only_evaluates({"python3", "t.py", "resume"}));
}

TEST_CASE("campaign configuration: format and keep_crc", "[campaign][unit]") {
  const auto c = CampaignConfig::parse(R"({"checkpoint": "m.pt", "command": "x", "format": "torch", "keep_crc": true})", "/cfg/c.json");
  CHECK(c.format == resil::inject::Format::torch);
  CHECK(c.keep_crc);
  CHECK(CampaignConfig::parse(c.to_json().dump(), "/cfg/c.json").to_json() == c.to_json());
  // Defaults are not written: a campaign.json of an older configuration stays the same.
  const auto d = CampaignConfig::parse(R"({"checkpoint": "m.h5", "command": "x"})", "/cfg/c.json");
  CHECK(d.format == resil::inject::Format::automatic);
  CHECK_FALSE(d.keep_crc);
  CHECK_FALSE(d.to_json().contains("format"));
  CHECK_FALSE(d.to_json().contains("keep_crc"));
  CHECK_THROWS_WITH(CampaignConfig::parse(R"({"checkpoint": "a", "command": "x", "format": "pickle"})", "c.json"),
                    Catch::Contains("format") && Catch::Contains("\"pickle\"") && Catch::Contains("\"safetensors\""));
  CHECK_THROWS_WITH(CampaignConfig::parse(R"({"checkpoint": "a", "command": "x", "keep_crc": 1})", "c.json"), Catch::Contains("keep_crc"));
}

TEST_CASE("two-level FIT", "[fit][unit]") {
  const auto m = FitModel::parse(R"({"name": "t", "source": "test values", "raw_fit_per_mbit": 10, "raw_fit_per_mbit_range": [5, 20],
      "mbit": 2, "exposure": 0.5, "patterns": [
        {"name": "single", "p": 0.8, "ecc_corrected": 1.0, "campaign_model": "flip"},
        {"name": "double", "p": 0.2, "ecc_corrected": 0.0, "ecc_detected": 0.5, "campaign_model": "adjacent:2"}]})", "fm.json");
  // raw = 10 * 2 * 0.5 = 10 FIT. Single bits are all corrected; doubles: half detected (DUE), half escape.
  const PatternEvidence single{100, 10, 5, 20}, dbl{50, 25, 10, 5};
  const auto r = compute_fit(m, {single, dbl}, single, 0, 0.95);
  CHECK(r.raw_fit == Approx(10));
  CHECK(r.sdc.value == Approx(10 * 0.2 * 0.5 * 0.5));                 // 0.5 FIT
  CHECK(r.critical_sdc.value == Approx(10 * 0.2 * 0.5 * 0.2));        // 0.2 FIT
  CHECK(r.due.value == Approx(10 * 0.2 * (0.5 + 0.5 * 0.1)));         // 1.1 FIT
  CHECK(r.sdc_low_level_only.value == Approx(10 * 0.2 * 0.5));        // 1 FIT
  CHECK(r.sdc_injection_only.value == Approx(10 * 0.1));              // 1 FIT
  const auto cp = clopper_pearson_interval(25, 50, 0.95);
  CHECK(r.sdc.lo == Approx(5 * 0.2 * 0.5 * cp.lo));
  CHECK(r.sdc.hi == Approx(20 * 0.2 * 0.5 * cp.hi));
  CHECK(r.sdc.complete);
  // An unmeasured escaping pattern: incomplete, bounds open to 1.
  const auto u = compute_fit(m, {single, PatternEvidence{}}, single, 0, 0.95);
  CHECK_FALSE(u.sdc.complete);
  CHECK(u.sdc.hi == Approx(20 * 0.2 * 0.5));
  CHECK_THROWS_AS(FitModel::parse(R"({"source": "x", "raw_fit_per_mbit": 1, "patterns": [{"name": "a", "p": 0.5}]})", "f"), resil::UsageError);
  CHECK_THROWS_AS(FitModel::parse(R"({"raw_fit_per_mbit": 1, "patterns": [{"name": "a", "p": 1}]})", "f"), resil::UsageError);
}

// ---- Monte Carlo propagation for the two-level FIT: samplers, then the propagation itself.
// Every sampler check uses a fixed seed (deterministic) and a tolerance of 5 standard errors of the
// statistic for the number of draws, so a correct sampler fails only for a ~1e-6 unlucky seed and a
// wrong one (bias larger than the tolerance) fails every time.
namespace {

struct Moments {
  double mean = 0, var = 0;
};
Moments moments(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m += v;
  m /= static_cast<double>(x.size());
  double s = 0;
  for (double v : x) s += (v - m) * (v - m);
  return {m, s / static_cast<double>(x.size() - 1)};
}
// Closed-form moments and excess kurtosis; the standard error of the sample variance is
// sqrt(var^2 (2 + excess kurtosis) / N).
void check_moments(const std::vector<double>& x, double mean, double var, double excess_kurtosis) {
  const auto n = static_cast<double>(x.size());
  const auto m = moments(x);
  CHECK(std::fabs(m.mean - mean) < 5 * std::sqrt(var / n));
  CHECK(std::fabs(m.var - var) < 5 * std::sqrt(var * var * (2 + excess_kurtosis) / n));
}
// |F(empirical q-quantile) - q| within 5 standard errors of an order statistic's CDF value.
bool quantile_ok(double cdf_at_quantile, double q, std::uint64_t n) {
  return std::fabs(cdf_at_quantile - q) < 5 * std::sqrt(q * (1 - q) / static_cast<double>(n));
}

}  // namespace

TEST_CASE("gamma sampler: closed-form mean and variance", "[fit][unit]") {
  const double a = GENERATE(0.5, 1.0, 2.5, 30.0);  // < 1 takes the U^(1/a) boost
  resil::Rng rng(20240611, 1);
  std::vector<double> x(200000);
  for (auto& v : x) v = sample_gamma(a, rng);
  INFO("shape " << a);
  check_moments(x, a, a, 6 / a);
  CHECK(*std::min_element(x.begin(), x.end()) >= 0);
  CHECK_THROWS_AS(sample_gamma(0, rng), resil::UsageError);
  CHECK_THROWS_AS(sample_gamma(-1, rng), resil::UsageError);
}

TEST_CASE("beta sampler: closed-form moments and Kolmogorov-Smirnov against the incomplete beta", "[fit][unit]") {
  const auto [a, b] = GENERATE(std::pair{0.5, 0.5}, std::pair{2.5, 10.5}, std::pair{0.5, 40.5}, std::pair{30.5, 2.5});
  INFO("Beta(" << a << ", " << b << ")");
  resil::Rng rng(77, 2);
  std::vector<double> x(200000);
  for (auto& v : x) v = sample_beta(a, b, rng);
  const double s = a + b, var = a * b / (s * s * (s + 1));
  const double kurt = 6 * ((a - b) * (a - b) * (s + 1) - a * b * (s + 2)) / (a * b * (s + 2) * (s + 3));
  check_moments(x, a / s, var, kurt);
  // KS distance on the first 20000 draws; 1.95 / sqrt(n) is the 0.1% critical value.
  std::vector<double> y(x.begin(), x.begin() + 20000);
  std::sort(y.begin(), y.end());
  double d = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double f = incomplete_beta(a, b, y[i]), n = static_cast<double>(y.size());
    d = std::max({d, std::fabs(f - static_cast<double>(i) / n), std::fabs(f - static_cast<double>(i + 1) / n)});
  }
  CHECK(d < 1.95 / std::sqrt(static_cast<double>(y.size())));
  // Same stream, same draws.
  resil::Rng r1(77, 2), r2(77, 2);
  CHECK(sample_beta(a, b, r1) == sample_beta(a, b, r2));
}

TEST_CASE("dirichlet sampler: marginal means and the simplex", "[fit][unit]") {
  const std::vector<double> alpha{0.5, 2.0, 7.5};
  const double a0 = 10;
  resil::Rng rng(3, 3);
  std::vector<std::vector<double>> cols(3, std::vector<double>(100000));
  std::vector<double> out(3);
  for (std::size_t i = 0; i < cols[0].size(); ++i) {
    sample_dirichlet(alpha, out, rng);
    REQUIRE(out[0] + out[1] + out[2] == Approx(1).epsilon(1e-12));
    for (int k = 0; k < 3; ++k) cols[k][i] = out[k];
  }
  for (int k = 0; k < 3; ++k) {
    // Marginal k is Beta(alpha_k, a0 - alpha_k).
    const double a = alpha[k], b = a0 - a, kurt = 6 * ((a - b) * (a - b) * (a0 + 1) - a * b * (a0 + 2)) / (a * b * (a0 + 2) * (a0 + 3));
    check_moments(cols[k], a / a0, a * b / (a0 * a0 * (a0 + 1)), kurt);
  }
  std::vector<double> wrong(2);
  CHECK_THROWS_AS(sample_dirichlet(alpha, wrong, rng), resil::UsageError);
}

TEST_CASE("summarize_draws: mean, median and interpolated percentiles", "[fit][unit]") {
  std::vector<double> d{5, 1, 4, 2, 3};
  const auto s = summarize_draws(d);
  CHECK(s.mean == Approx(3));
  CHECK(s.median == Approx(3));
  CHECK(s.p2_5 == Approx(1.1));   // h = 0.025 * 4 = 0.1
  CHECK(s.p97_5 == Approx(4.9));
  std::vector<double> one{7};
  CHECK(summarize_draws(one).p97_5 == 7);
}

TEST_CASE("two-level FIT: Monte Carlo propagation", "[fit][unit]") {
  const std::uint64_t N = 20000;
  const auto m = FitModel::parse(R"({"name": "t", "source": "test values", "raw_fit_per_mbit": 10, "raw_fit_per_mbit_range": [5, 20],
      "mbit": 2, "exposure": 0.5, "patterns": [
        {"name": "single", "p": 0.8, "ecc_corrected": 1.0, "campaign_model": "flip"},
        {"name": "double", "p": 0.2, "ecc_corrected": 0.0, "ecc_detected": 0.5, "campaign_model": "adjacent:2"}]})", "fm.json");
  const PatternEvidence single{100, 10, 5, 20}, dbl{50, 25, 10, 5};
  SECTION("deterministic for a seed; the plug-in value and bounds do not change, the point is the median") {
    const auto plain = compute_fit(m, {single, dbl}, single, 0, 0.95);
    const auto a = compute_fit(m, {single, dbl}, single, 0, 0.95, {N, 7});
    const auto b = compute_fit(m, {single, dbl}, single, 0, 0.95, {N, 7});
    const auto c = compute_fit(m, {single, dbl}, single, 0, 0.95, {N, 8});
    CHECK_FALSE(plain.sdc.mc);
    CHECK(a.to_json() == b.to_json());
    CHECK(a.to_json().at("sdc").at("mc") != c.to_json().at("sdc").at("mc"));
    CHECK(a.to_json().at("monte_carlo").at("seed") == 7);
    for (auto f : {&FitResult::sdc, &FitResult::critical_sdc, &FitResult::due, &FitResult::sdc_low_level_only, &FitResult::sdc_injection_only}) {
      const auto& v = a.*f;
      CHECK(v.plug_in == (plain.*f).value);
      CHECK((plain.*f).plug_in == (plain.*f).value);  // without a Monte Carlo the point is the plug-in value
      REQUIRE(v.mc);
      CHECK(v.value == v.mc->median);
      CHECK(v.lo == (plain.*f).lo);
      CHECK(v.hi == (plain.*f).hi);
      REQUIRE(v.mc);
      CHECK(v.lo <= v.mc->median);  // the conservative bounds hold the median
      CHECK(v.mc->median <= v.hi);
      CHECK(v.mc->p2_5 < v.mc->median);
      CHECK(v.mc->median < v.mc->p97_5);
    }
  }
  SECTION("raw rate: log-uniform (default) or uniform over the range") {
    // One pattern, all detected: DUE = raw exactly, so its draws are the raw-rate draws.
    const std::string body = R"("raw_fit_per_mbit": 10, "raw_fit_per_mbit_range": [5, 20], "mbit": 1,
        "patterns": [{"name": "d", "p": 1, "ecc_detected": 1, "campaign_model": "flip"}]})";
    const auto lu = compute_fit(FitModel::parse(R"({"source": "t", )" + body, "f"), {PatternEvidence{}}, {}, 0, 0.95, {N, 1});
    const auto F = [](double x) { return std::log(x / 5) / std::log(4.0); };  // log-uniform CDF on [5, 20]
    CHECK(quantile_ok(F(lu.due.mc->median), 0.5, N));
    CHECK(quantile_ok(F(lu.due.mc->p2_5), 0.025, N));
    CHECK(quantile_ok(F(lu.due.mc->p97_5), 0.975, N));
    const double mean = 15 / std::log(4.0), var = (400 - 25) / (2 * std::log(4.0)) - mean * mean;
    CHECK(std::fabs(lu.due.mc->mean - mean) < 5 * std::sqrt(var / N));
    const auto un = compute_fit(FitModel::parse(R"({"source": "t", "raw_fit_distribution": "uniform", )" + body, "f"), {PatternEvidence{}}, {}, 0, 0.95, {N, 1});
    CHECK(quantile_ok((un.due.mc->median - 5) / 15, 0.5, N));
    CHECK(quantile_ok((un.due.mc->p97_5 - 5) / 15, 0.975, N));
    CHECK(un.to_json().at("monte_carlo").at("raw_rate").get<std::string>().rfind("uniform", 0) == 0);
  }
  SECTION("P(SDC | pattern) from the Jeffreys posterior; patterns of one campaign share a draw") {
    // Fixed raw rate 1, two patterns measured by the same campaign (3 SDC in 20): SDC = q, q ~ Beta(3.5, 17.5).
    // Independent draws per pattern would average two Betas and narrow the interval.
    const auto fm = FitModel::parse(R"({"source": "t", "raw_fit_per_mbit": 1, "mbit": 1, "patterns": [
        {"name": "a", "p": 0.5, "campaign_model": "flip"}, {"name": "b", "p": 0.5, "campaign_model": "flip"}]})", "f");
    const PatternEvidence e{20, 3, 1, 0};
    const auto r = compute_fit(fm, {e, e}, e, 0, 0.95, {N, 3});
    CHECK(quantile_ok(incomplete_beta(3.5, 17.5, r.sdc.mc->median), 0.5, N));
    CHECK(quantile_ok(incomplete_beta(3.5, 17.5, r.sdc.mc->p2_5), 0.025, N));
    CHECK(quantile_ok(incomplete_beta(3.5, 17.5, r.sdc.mc->p97_5), 0.975, N));
    CHECK(quantile_ok(incomplete_beta(1.5, 19.5, r.critical_sdc.mc->median), 0.5, N));
    // No DUE seen: Beta(0.5, 20.5), not a point mass at 0; the point (the median) lies inside its interval.
    CHECK(r.due.plug_in == 0);
    CHECK(r.due.value > 0);
    CHECK(r.due.mc->p2_5 <= r.due.value);
    CHECK(r.due.value <= r.due.mc->p97_5);
    CHECK(quantile_ok(incomplete_beta(0.5, 20.5, r.due.value), 0.5, N));
    CHECK(quantile_ok(incomplete_beta(0.5, 20.5, r.due.mc->p97_5), 0.975, N));
    // An unmeasured pattern draws from the prior Beta(1/2, 1/2) and stays incomplete.
    const auto u = compute_fit(fm, {e, PatternEvidence{}}, e, 0, 0.95, {N, 3});
    CHECK_FALSE(u.sdc.complete);
    CHECK(u.sdc.mc->p97_5 > r.sdc.mc->p97_5);
  }
  SECTION("restore_probability scales every FIT, its bounds and its draws") {
    const auto half = FitModel::parse(R"({"name": "t", "source": "test values", "raw_fit_per_mbit": 10, "raw_fit_per_mbit_range": [5, 20],
      "mbit": 2, "exposure": 0.5, "restore_probability": 0.25, "patterns": [
        {"name": "single", "p": 0.8, "ecc_corrected": 1.0, "campaign_model": "flip"},
        {"name": "double", "p": 0.2, "ecc_corrected": 0.0, "ecc_detected": 0.5, "campaign_model": "adjacent:2"}]})", "fm.json");
    CHECK(half.restore_probability == 0.25);
    CHECK(m.restore_probability == 1.0);  // the default: every checkpoint is restored
    const auto a = compute_fit(m, {single, dbl}, single, 0, 0.95, {N, 7});
    const auto q = compute_fit(half, {single, dbl}, single, 0, 0.95, {N, 7});
    for (auto f : {&FitResult::sdc, &FitResult::critical_sdc, &FitResult::due}) {
      CHECK((q.*f).plug_in == Approx(0.25 * (a.*f).plug_in));
      CHECK((q.*f).lo == Approx(0.25 * (a.*f).lo));
      CHECK((q.*f).hi == Approx(0.25 * (a.*f).hi));
      CHECK((q.*f).value == Approx(0.25 * (a.*f).value));
    }
    CHECK_THROWS_AS(FitModel::parse(R"({"source": "t", "raw_fit_per_mbit": 1, "restore_probability": 1.5,
        "patterns": [{"name": "a", "p": 1, "campaign_model": "flip"}]})", "f"), resil::UsageError);
  }
  SECTION("pattern mix from counts: Dirichlet(count + 1/2)") {
    const auto fm = FitModel::parse(R"({"source": "t", "raw_fit_per_mbit": 1, "mbit": 1, "patterns": [
        {"name": "a", "count": 30, "ecc_detected": 1}, {"name": "b", "count": 10, "p": 0.25, "ecc_corrected": 1}]})", "f");
    REQUIRE(fm.has_counts());
    CHECK(fm.patterns[0].p == Approx(0.75));
    const auto r = compute_fit(fm, {PatternEvidence{}, PatternEvidence{}}, {}, 0, 0.95, {N, 5});
    CHECK(r.dirichlet_mix);
    CHECK(r.due.plug_in == Approx(0.75));
    // DUE = P_a ~ Beta(30.5, 10.5).
    const double a = 30.5, b = 10.5, s = a + b;
    CHECK(std::fabs(r.due.mc->mean - a / s) < 5 * std::sqrt(a * b / (s * s * (s + 1)) / N));
    CHECK(quantile_ok(incomplete_beta(a, b, r.due.mc->median), 0.5, N));
    // Bounds let P_a range over its Clopper-Pearson interval.
    CHECK(r.due.lo == Approx(clopper_pearson_interval(30, 40, 0.95).lo));
    CHECK(r.due.hi == Approx(clopper_pearson_interval(30, 40, 0.95).hi));
  }
  SECTION("fault-model errors") {
    const auto bad = [](const std::string& j) { return FitModel::parse(j, "fm.json"); };
    // counts on some patterns only; p disagreeing with the counts; log-uniform from 0; unknown distribution.
    CHECK_THROWS_AS(bad(R"({"source": "t", "raw_fit_per_mbit": 1, "patterns": [{"name": "a", "count": 1, "p": 0.5}, {"name": "b", "p": 0.5}]})"), resil::UsageError);
    CHECK_THROWS_AS(bad(R"({"source": "t", "raw_fit_per_mbit": 1, "patterns": [{"name": "a", "count": 3, "p": 0.5}, {"name": "b", "count": 1}]})"), resil::UsageError);
    CHECK_THROWS_AS(bad(R"({"source": "t", "raw_fit_per_mbit": 1, "raw_fit_per_mbit_range": [0, 2], "patterns": [{"name": "a", "p": 1}]})"), resil::UsageError);
    CHECK_NOTHROW(bad(R"({"source": "t", "raw_fit_per_mbit": 1, "raw_fit_per_mbit_range": [0, 2], "raw_fit_distribution": "uniform", "patterns": [{"name": "a", "p": 1}]})"));
    CHECK_THROWS_AS(bad(R"({"source": "t", "raw_fit_per_mbit": 1, "raw_fit_distribution": "normal", "patterns": [{"name": "a", "p": 1}]})"), resil::UsageError);
    CHECK(bad(R"({"source": "t", "assumptions": "one", "raw_fit_per_mbit": 1, "patterns": [{"name": "a", "p": 1}]})").assumptions.size() == 1);
  }
}

TEST_CASE("campaign configuration: every value type- and range-checked, naming the key", "[campaign][unit]") {
  const std::string head = R"({"checkpoint": "a.h5", "command": "x", )";
  auto refused = [&](const std::string& members, const std::string& key) {
    INFO(members);
    try {
      CampaignConfig::parse(head + members + "}", "c.json");
      FAIL("accepted");
    } catch (const resil::UsageError& e) {
      CHECK(std::string(e.what()).find(key) != std::string::npos);
    }
  };
  for (const char* v : {"0", "-5", "1.5", "\"5\"", "null", "true", "1e308", "[3]"}) refused(std::string(R"("trials": )") + v, "trials");
  for (const char* v : {"-1", "1e30", "18446744073709551616", "0.5", "\"7\"", "false"}) refused(std::string(R"("seed": )") + v, "seed");
  for (const char* v : {"0", "-1", "\"60\"", "null"}) refused(std::string(R"("timeout_s": )") + v, "timeout_s");
  for (const char* v : {"0", "-2", "1.5", "1e9", "\"2\""}) refused(std::string(R"("inject": {"flips": )") + v + "}", "inject.flips");
  for (const char* v : {"0", "1", "-0.5", "\"0.95\""}) refused(std::string(R"("confidence": )") + v, "confidence");
  for (const char* v : {"[300]", "[-1]", "[0]", "[4.5]", "\"4\"", "[true]"}) refused(std::string(R"("nan_codes": )") + v, "nan_codes");
  refused(R"("tolerance": -0.1)", "tolerance");
  refused(R"("higher_is_better": 1)", "higher_is_better");
  refused(R"("inject": "flips")", "inject");
  refused(R"("golden": "g.json")", "golden");
  refused(R"("inject": {"flipz": 2})", "inject.flipz");
  refused(R"("golden": {"summary": "g.json", "extra": 1})", "golden.extra");
  refused(R"("inject": {"include": "/model/*"})", "inject.include");
  refused(R"("inject": {"as": "f64"})", "inject.as");
  refused(R"("golden": {"final_checkpoint": "f.h5"})", "golden.final_checkpoint");
  // Accepted limits: integral floats below 2^53, the full 64-bit seed range, exit codes 1..255.
  const auto c = CampaignConfig::parse(head + R"("trials": 1e15, "seed": 18446744073709551615, "nan_codes": [1, 255], "inject": {"flips": 100000000}})", "c.json");
  CHECK(c.trials == 1'000'000'000'000'000ull);
  CHECK(c.seed == ~std::uint64_t{0});
  CHECK(c.flips == 100'000'000);
  CampaignConfig built = c;
  built.trials = 0;
  CHECK_THROWS_AS(built.validate("code"), resil::UsageError);
  for (const char* s : {"0/0", "3/2", "-1/2", "+0/1", "-0/1", " 1/2", "0/1/2", "a/b", "", "0/18446744073709551616"}) {
    INFO(s);
    CHECK_THROWS_AS(ShardSpec::parse(s), resil::UsageError);
  }
}

TEST_CASE("fault model for fit: every numeric field checked, naming it", "[fit][unit]") {
  auto model = [](const std::string& top, const std::string& pattern) {
    return R"({"source": "t", "raw_fit_per_mbit": 10, "raw_fit_per_mbit_range": [5, 20], )" + top +
           R"( "patterns": [{"name": "a", "p": 1, "campaign_model": "flip")" + pattern + "}]}";
  };
  CHECK_NOTHROW(FitModel::parse(model("", ""), "f"));
  auto refused = [&](const std::string& top, const std::string& pattern, const std::string& key) {
    INFO(top << pattern);
    try {
      FitModel::parse(model(top, pattern), "f");
      FAIL("accepted");
    } catch (const resil::UsageError& e) {
      CHECK(std::string(e.what()).find(key) != std::string::npos);
    }
  };
  for (const char* v : {"-3", "\"3\"", "true", "1e300"}) refused(std::string(R"("mbit": )") + v + ",", "", "mbit");
  for (const char* v : {"-0.1", "2", "\"1\""}) refused(std::string(R"("exposure": )") + v + ",", "", "exposure");
  refused(R"("raw_fit_per_mbit_range": [-5, 20],)", "", "raw_fit_per_mbit_range");
  refused(R"("raw_fit_per_mbit_range": [5],)", "", "raw_fit_per_mbit_range");
  refused(R"("illustrative": "no",)", "", "illustrative");
  for (const char* f : {R"(, "ecc_corrected": 1.5)", R"(, "ecc_detected": -1)", R"(, "count": -1)", R"(, "count": "3")"})
    refused("", f, "patterns[0].");
  CHECK_THROWS_AS(FitModel::parse(R"({"source": "t", "raw_fit_per_mbit": 1e308, "patterns": [{"name": "a", "p": 1}]})", "f"), resil::UsageError);
  CHECK_THROWS_AS(FitModel::parse(R"({"source": "t", "raw_fit_per_mbit": 1, "patterns": [{"name": "a", "p": true}]})", "f"), resil::UsageError);
  CHECK_THROWS_AS(FitModel::parse(R"({"source": "t", "raw_fit_per_mbit": 1, "patterns": "a"})", "f"), resil::UsageError);
}

TEST_CASE("pattern tables: a weight is a JSON number", "[fault_model][unit]") {
  // Also in tests/inject/fuzz/corpus/pattern (bool-weight, null-weight, weight-overflow, bad-types).
  CHECK_THROWS_AS(parse_pattern_table(R"({"patterns": [{"bits": [3], "p": true}]})", "t.json"), resil::CorruptInputError);
  CHECK_THROWS_AS(parse_pattern_table(R"({"patterns": [{"bits": [3], "weight": "2"}]})", "t.json"), resil::CorruptInputError);
  CHECK_THROWS_AS(parse_pattern_table(R"({"patterns": [{"bits": [1], "p": 1e308}, {"bits": [2], "p": 1e308}]})", "t.json"), resil::CorruptInputError);
  CHECK(parse_pattern_table(R"({"patterns": [{"bits": [3], "p": 2}, {"bits": [4], "weight": 6}]})", "t.json").entries.at(1).p == Approx(0.75));
}
