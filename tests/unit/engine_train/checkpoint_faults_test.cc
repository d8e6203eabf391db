// Faults in the trainer's checkpoints, injected through the Env seam (tests/unit/fault_env.h) the
// trainer's checkpoint I/O goes through: a full disk while a rank's state is written, EIO while
// one is read back, and a crash between a file's write and its rename. Each must end in an error
// naming the file, and no torn checkpoint may ever be loaded: `latest` resumes from the last
// complete one.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>

#include "engine/parallel/process_group.h"
#include "engine/train/pretokenized_dataset.h"
#include "engine/train/sharded_checkpoint.h"
#include "engine/train/trainer.h"
#include "unit/engine_train/tiny_llama.h"
#include "unit/fault_env.h"

namespace air::engine::train {
namespace {

namespace fs = std::filesystem;

constexpr int kVocab = air::testing::kTinyLlamaVocab;

std::unique_ptr<LlamaModel> TinyModel() { return air::testing::TinyLlama(5); }

std::vector<TokenizedExample> Examples() {
  std::vector<TokenizedExample> out;
  for (int i = 0; i < 8; ++i) {
    TokenizedExample ex;
    for (int t = 0; t < 6 + i; ++t) ex.input_ids.push_back((7 * i + 3 * t) % kVocab);
    ex.labels = ex.input_ids;
    out.push_back(ex);
  }
  return out;
}

class CheckpointFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("air_ckpt_fault_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  TrainConfig Config(int max_steps, const std::string& resume = "") const {
    TrainConfig c;
    c.model_name = "tiny";
    c.dataset_name = "examples";
    c.output_dir = (root_ / "out").string();
    c.max_seq_len = 64;
    c.learning_rate = 1e-2;
    c.max_steps = max_steps;
    c.save_steps = 1;
    c.logging_steps = 1;
    c.resume_from_checkpoint = resume;
    return c;
  }

  Result<TrainSummary> Train(const TrainConfig& config, Env* env) {
    auto model = TinyModel();
    DataLoaderOptions options;
    options.batch_size = config.per_device_batch_size;
    options.seq_len = config.max_seq_len;
    options.shuffle = false;
    auto loader = DataLoader::Create(Examples(), 0, options);
    EXPECT_TRUE(loader.ok()) << loader.status().ToString();
    // One process: FSDP over a group of one, the path `air train` takes.
    auto group = parallel::SingleProcessGroup();
    parallel::CommThread comm;
    auto sharded = fsdp::Fsdp::Apply(*model, *group, comm, {.precision = config.precision});
    if (!sharded.ok()) return sharded.status();
    TrainerIo io;
    io.env = env;
    io.parallel = {.group = group.get(), .comm = &comm, .fsdp = sharded->get()};
    Trainer trainer(model.get(), config, io);
    return trainer.Run(*loader);
  }

  std::string Checkpoint(int step) const {
    return (root_ / "out" / ("checkpoint-" + std::to_string(step))).string();
  }

  // Files left under a temporary name anywhere in the output directory.
  size_t TemporaryFiles() const {
    size_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(root_ / "out")) {
      n += e.path().filename().string().find(".tmp.") != std::string::npos;
    }
    return n;
  }

  fs::path root_;
};

TEST_F(CheckpointFaultTest, DiskFullWhileARankStateIsWrittenNamesTheFileAndKeepsTheLastOne) {
  testing::FaultEnv full;  // checkpoint-2's rank state hits a full disk
  full.FailWritesUnder(Checkpoint(2) + "/train_state/", ENOSPC);
  auto trained = Train(Config(3), &full);
  ASSERT_FALSE(trained.ok());
  EXPECT_EQ(trained.status().code(), ErrorCode::kResourceExhausted) << trained.status().ToString();
  EXPECT_NE(trained.status().message().find(Checkpoint(2) + "/train_state/rank-0-of-1.safetensors"),
            std::string::npos)
      << trained.status().ToString();
  EXPECT_NE(trained.status().message().find("disk full"), std::string::npos);
  EXPECT_GE(full.writes_failed(), 1);
  // Nothing torn: checkpoint-2 is not complete, no temporary file is left, and `latest` is
  // checkpoint-1, which resumes.
  EXPECT_FALSE(fs::exists(Checkpoint(2) + "/COMPLETE"));
  EXPECT_EQ(TemporaryFiles(), 0u);
  EXPECT_EQ(LatestCheckpoint(DefaultEnv(), (root_ / "out").string()), Checkpoint(1));
  auto resumed = Train(Config(3, "latest"), DefaultEnv());
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->steps, 3);
}

TEST_F(CheckpointFaultTest, EioReadingACheckpointBackNamesTheFile) {
  ASSERT_TRUE(Train(Config(2), DefaultEnv()).ok());
  const std::string shard = Checkpoint(2) + "/train_state/rank-0-of-1.safetensors";
  testing::FaultEnv failing;
  failing.FailReadsUnder(shard, EIO);
  auto resumed = Train(Config(3, Checkpoint(2)), &failing);
  ASSERT_FALSE(resumed.ok());
  EXPECT_NE(resumed.status().message().find(shard), std::string::npos)
      << resumed.status().ToString();
  EXPECT_NE(resumed.status().message().find("Input/output error"), std::string::npos)
      << resumed.status().ToString();

  testing::FaultEnv state_eio;  // the same for the trainer state
  state_eio.FailReadsUnder(Checkpoint(2) + "/trainer_state.json", EIO);
  resumed = Train(Config(3, Checkpoint(2)), &state_eio);
  ASSERT_FALSE(resumed.ok());
  EXPECT_NE(resumed.status().message().find(Checkpoint(2) + "/trainer_state.json"),
            std::string::npos)
      << resumed.status().ToString();
}

// A crash (the process exits) after a file of checkpoint-2 was written but before its rename:
// whichever file it was, checkpoint-2 is never resumed from and `latest` is checkpoint-1.
// The death test forks (gtest's "fast" style): the child crashes in this test's directory.
TEST_F(CheckpointFaultTest, CrashBetweenWriteAndRenameLeavesTheLastCompleteCheckpoint) {
  for (const char* file : {"rank-0-of-1.safetensors", "trainer_state.json", "COMPLETE"}) {
    SCOPED_TRACE(file);
    fs::remove_all(root_ / "out");
    const std::string target = Checkpoint(2);
    EXPECT_EXIT(
        {
          testing::FaultEnv crashing;
          crashing.BeforeRename([&](const std::string&, const std::string& to) {
            if (to.rfind(target, 0) == 0 && to.ends_with(std::string("/") + file)) ::_exit(7);
          });
          (void)Train(Config(3), &crashing);
          ::_exit(0);
        },
        ::testing::ExitedWithCode(7), "");
    EXPECT_FALSE(fs::exists(target + "/COMPLETE"));
    EXPECT_EQ(LatestCheckpoint(DefaultEnv(), (root_ / "out").string()), Checkpoint(1));
    auto torn = Train(Config(3, target), DefaultEnv());
    ASSERT_FALSE(torn.ok());
    EXPECT_NE(torn.status().message().find("not a complete checkpoint"), std::string::npos)
        << torn.status().ToString();
    auto resumed = Train(Config(3, "latest"), DefaultEnv());
    ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  }
}

}  // namespace
}  // namespace air::engine::train
