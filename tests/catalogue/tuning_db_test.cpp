// The tuning database: round trip, lookup by bucket, and every bad input
// named (file, record, field).
#include "deltac/tuning_db.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

using namespace deltac;

namespace {

const char *kGood = R"({"format": "deltac-tuning-db", "version": 2, "records": [
  {"family": "cpu_recurrent", "variant": "gated", "key_dim": 128,
   "value_dim": 128, "in_dtype": "bf16", "tile_v": 16, "time_us": 3.5},
  {"family": "cpu_chunked", "variant": "gated", "key_dim": 128,
   "value_dim": 128, "in_dtype": "bf16", "chunk": 64, "max_tokens": 4096},
  {"family": "cuda_recurrent", "variant": "kda", "key_dim": 64,
   "value_dim": 64, "in_dtype": "f32", "tile_v": 16, "warps": 2,
   "env": {"gpu": "NVIDIA H200"}}]})";

std::string parseError(const std::string &text) {
  TuningDB db;
  std::string err;
  EXPECT_FALSE(parse_tuning_db(text, "t.json", &db, &err));
  return err;
}

std::string withRecord(const std::string &rec) {
  return R"({"format": "deltac-tuning-db", "version": 2, "records": [)" + rec +
         "]}";
}

TEST(TuningDB, ParsesAndRoundTrips) {
  TuningDB db, back;
  std::string err;
  ASSERT_TRUE(parse_tuning_db(kGood, "good", &db, &err)) << err;
  ASSERT_EQ(db.records.size(), 3u);
  EXPECT_EQ(db.records[0].config.family, Family::CpuRecurrent);
  EXPECT_EQ(db.records[0].config.tile_v, 16);
  EXPECT_EQ(db.records[1].max_tokens, 4096);
  EXPECT_EQ(db.records[2].config.warps, 2);
  ASSERT_TRUE(parse_tuning_db(format_tuning_db(db), "back", &back, &err))
      << err;
  ASSERT_EQ(back.records.size(), db.records.size());
  for (size_t i = 0; i < db.records.size(); ++i) {
    EXPECT_EQ(back.records[i].config, db.records[i].config);
    EXPECT_EQ(back.records[i].max_tokens, db.records[i].max_tokens);
    EXPECT_EQ(back.records[i].time_us, db.records[i].time_us);
  }
}

TEST(TuningDB, LookupByModeDeviceAndBucket) {
  TuningDB db;
  std::string err;
  ASSERT_TRUE(parse_tuning_db(kGood, "good", &db, &err)) << err;
  Problem p;
  p.variant = DELTAC_VARIANT_GATED, p.K = p.V = 128;
  p.in_dtype = DELTAC_BF16, p.out_dtype = DELTAC_F32;
  p.max_seqlen = 1000;
  const TuningRecord *r = db.lookup(Device::CPU, Mode::Chunked, p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->config.chunk, 64);
  p.max_seqlen = 5000; // past the chunked record's bucket
  EXPECT_EQ(db.lookup(Device::CPU, Mode::Chunked, p), nullptr);
  r = db.lookup(Device::CPU, Mode::Recurrent, p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->config.family, Family::CpuRecurrent);
  p.max_seqlen = 100; // auto: the smaller bucket wins
  r = db.lookup(Device::CPU, Mode::Auto, p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->config.family, Family::CpuChunked);
  EXPECT_EQ(db.lookup(Device::CUDA, Mode::Auto, p), nullptr);
  p.in_dtype = DELTAC_F32; // other key
  EXPECT_EQ(db.lookup(Device::CPU, Mode::Chunked, p), nullptr);
}

struct Bad {
  std::string text, expect;
};

TEST(TuningDB, BadInputIsNamed) {
  const std::string rec =
      R"("variant": "gated", "key_dim": 128, "value_dim": 128, "in_dtype": "bf16")";
  const Bad cases[] = {
      {"", "not valid JSON"},
      {"{\"format\": \"deltac-tuning-db\", \"version\": 2, \"rec", "not valid JSON"},
      {"[]", "top level must be an object"},
      {R"({"format": "x", "version": 2, "records": []})", "'format'"},
      {R"({"format": "deltac-tuning-db", "version": 1, "records": []})",
       "'version' must be 2 (got 1"},
      {R"({"format": "deltac-tuning-db", "version": 2, "records": {}})",
       "'records' must be an array"},
      {withRecord("3"), "record 0 must be an object"},
      {withRecord(R"({"family": "gpu_magic", )" + rec + "}"),
       "field 'family' must be one of"},
      {withRecord(R"({"family": "cpu_chunked", "chunk": 48, )" + rec + "}"),
       "record 0: cpu_chunked: chunk = 48, expected one of 16, 32, 64"},
      {withRecord(R"({"family": "cpu_chunked", "chunk": 32, "warps": 4, )" +
                  rec + "}"),
       "field 'warps' must be absent: cpu_chunked has no such knob"},
      {withRecord(R"({"family": "cpu_chunked", )" + rec + "}"),
       "field 'chunk' must be an integer"},
      {withRecord(R"({"family": "cpu_chunked", "chunk": "32", )" + rec + "}"),
       "field 'chunk' must be an integer"},
      {withRecord(R"({"family": "cuda_recurrent", "tile_v": 32, "warps": 1, )" +
                  rec + "}"),
       "warps = 1 does not split K"},
      {withRecord(R"({"family": "cpu_recurrent", "tile_v": 16, "variant": "x",
                      "key_dim": 128, "value_dim": 128, "in_dtype": "bf16"})"),
       "field 'variant' must be one of"},
      {withRecord(R"({"family": "cpu_recurrent", "tile_v": 16, "variant": "gated",
                      "key_dim": 120, "value_dim": 128, "in_dtype": "bf16"})"),
       "K = 120"},
      {withRecord(R"({"family": "cpu_recurrent", "tile_v": 16, "time_us": -1, )" +
                  rec + "}"),
       "field 'time_us' must be a non-negative number"},
  };
  for (const Bad &b : cases) {
    std::string err = parseError(b.text);
    EXPECT_NE(err.find(b.expect), std::string::npos)
        << "input: " << b.text << "\nerror: " << err;
    EXPECT_EQ(err.rfind("tuning db 't.json': ", 0), 0u) << err;
  }
}

TEST(TuningDB, MissingFileAndAtomicSave) {
  TuningDB db;
  std::string err;
  EXPECT_FALSE(load_tuning_db("/nonexistent/db.json", &db, &err));
  EXPECT_NE(err.find("/nonexistent/db.json"), std::string::npos);
  ASSERT_TRUE(parse_tuning_db(kGood, "good", &db, &err)) << err;
  const std::string path = ::testing::TempDir() + "deltac_tuning_db.json";
  ASSERT_TRUE(save_tuning_db(path, db, &err)) << err;
  TuningDB back;
  ASSERT_TRUE(load_tuning_db(path, &back, &err)) << err;
  EXPECT_EQ(back.records.size(), 3u);
  EXPECT_FALSE(save_tuning_db("/nonexistent/dir/db.json", db, &err));
  std::remove(path.c_str());
}

} // namespace
