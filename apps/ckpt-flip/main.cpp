// ckpt-flip: precise, fast, reproducible bit flips in checkpoint files: HDF5, torch.save, safetensors,
// NumPy (docs/guide/ckpt-flip.md).
#include "commands.hpp"

#include "resil/app/main.hpp"
#include "resil/config.hpp"

int main(int argc, char** argv) {
  using namespace resil::app::ckpt_flip;
  CLI::App app{"ckpt-flip: flip bits in checkpoint files (HDF5, torch.save .pt, safetensors, NumPy .npy/.npz; told by\n"
               "their content) in their stored width, reproducibly, with an exact undo; find damage, compare files,\n"
               "and run fault-injection campaigns with statistics.\n"
               "Bit 0 is the least significant bit of the stored word. See docs/guide/ckpt-flip.md."};
  app.set_version_flag("--version", std::string("ckpt-flip ") + resil::version);
  app.require_subcommand(1);
  InspectOptions inspect;
  InjectOptions inject;
  RevertOptions revert;
  ReplayOptions replay;
  DiffOptions diff;
  ScanOptions scan;
  CampaignOptions campaign;
  PlanOptions plan;
  ReportOptions report;
  FitOptions fit;
  auto* c_inspect = setup_inspect(app, inspect);
  auto* c_inject = setup_inject(app, inject);
  auto* c_revert = setup_revert(app, revert);
  auto* c_replay = setup_replay(app, replay);
  auto* c_diff = setup_diff(app, diff);
  auto* c_scan = setup_scan(app, scan);
  auto* c_campaign = setup_campaign(app, campaign);
  auto* c_plan = setup_plan(app, plan);
  auto* c_report = setup_report(app, report);
  auto* c_fit = setup_fit(app, fit);
  inject.argv.assign(argv, argv + argc);
  return resil::app::guarded_main("ckpt-flip", app, argc, argv, [&]() -> int {
    if (c_inspect->parsed()) return run_inspect(inspect);
    if (c_inject->parsed()) return run_inject(inject);
    if (c_revert->parsed()) return run_revert(revert);
    if (c_replay->parsed()) return run_replay(replay);
    if (c_diff->parsed()) return run_diff(diff);
    if (c_scan->parsed()) return run_scan(scan);
    if (c_campaign->parsed()) return run_campaign(campaign);
    if (c_plan->parsed()) return run_plan(plan);
    if (c_report->parsed()) return run_report(report);
    if (c_fit->parsed()) return run_fit(fit);
    return 2;
  });
}
