// The tuning database (deltac/tuning_db.h): format -> parse round trip,
// lookup by bucket, and parse errors that name the source, record and field.
#include "deltac/tuning_db.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

namespace deltac {
namespace {

TuningRecord record(Family f, int variant, int K, int V, int in_dtype,
                    int64_t max_tokens) {
  TuningRecord r;
  r.variant = variant;
  r.K = K;
  r.V = V;
  r.in_dtype = in_dtype;
  r.max_tokens = max_tokens;
  Problem p;
  p.variant = variant, p.K = K, p.V = V, p.in_dtype = in_dtype;
  p.out_dtype = family_info(f).device == Device::CUDA ? in_dtype : DELTAC_F32;
  r.config = default_config(f, p);
  return r;
}

TEST(TuningDb, FormatParseRoundTrip) {
  TuningDB db;
  db.records.push_back(
      record(Family::CpuRecurrent, DELTAC_VARIANT_GATED, 128, 128, DELTAC_F32, 0));
  db.records.back().config.tile_v = 16;
  db.records.push_back(
      record(Family::CpuChunked, DELTAC_VARIANT_KDA, 64, 64, DELTAC_BF16, 4096));
  db.records.back().config.chunk = 64;
  db.records.back().time_us = 12.5;
  db.records.push_back(
      record(Family::CpuDecode, DELTAC_VARIANT_DELTA, 32, 48, DELTAC_F32, 1));
  db.records.push_back(record(Family::CudaRecurrent, DELTAC_VARIANT_GATED, 256,
                              128, DELTAC_BF16, 0));
  db.records.back().config.warps = 8;
  const std::string text = format_tuning_db(db);
  TuningDB back;
  std::string err;
  ASSERT_TRUE(parse_tuning_db(text, "mem", &back, &err)) << err;
  ASSERT_EQ(back.records.size(), db.records.size());
  for (size_t i = 0; i < db.records.size(); ++i) {
    const TuningRecord &a = db.records[i], &b = back.records[i];
    EXPECT_EQ(a.variant, b.variant) << i;
    EXPECT_EQ(a.K, b.K) << i;
    EXPECT_EQ(a.V, b.V) << i;
    EXPECT_EQ(a.in_dtype, b.in_dtype) << i;
    EXPECT_EQ(a.max_tokens, b.max_tokens) << i;
    EXPECT_TRUE(a.config == b.config) << i;
    EXPECT_EQ(a.time_us, b.time_us) << i;
  }
  EXPECT_EQ(format_tuning_db(back), text);
}

// Databases written before cuda_chunked read split, fuse and scan still load
// (absent = 0: the kernel's rules, three launches); given, they round-trip.
TEST(TuningDb, ChunkedSplitAndFuseMayBeAbsent) {
  const std::string old = R"({"format": "deltac-tuning-db", "version": 2, "records": [
    {"family": "cuda_chunked", "variant": "gated", "key_dim": 128,
     "value_dim": 128, "in_dtype": "bf16", "chunk": 64, "tile_v": 64,
     "warps": 8, "stages": 2}]})";
  TuningDB db;
  std::string err;
  ASSERT_TRUE(parse_tuning_db(old, "old", &db, &err)) << err;
  ASSERT_EQ(db.records.size(), 1u);
  EXPECT_EQ(db.records[0].config.split, 0);
  EXPECT_EQ(db.records[0].config.fuse, 0);
  EXPECT_EQ(db.records[0].config.scan, 0);
  db.records[0].config.split = 4, db.records[0].config.fuse = 1;
  db.records[0].config.scan = 1;
  const std::string text = format_tuning_db(db);
  EXPECT_NE(text.find("\"split\": 4"), std::string::npos) << text;
  EXPECT_NE(text.find("\"fuse\": 1"), std::string::npos) << text;
  EXPECT_NE(text.find("\"scan\": 1"), std::string::npos) << text;
  TuningDB back;
  ASSERT_TRUE(parse_tuning_db(text, "new", &back, &err)) << err;
  EXPECT_TRUE(back.records[0].config == db.records[0].config);
  // A knob without 0 among its values stays required.
  std::string noChunk = old;
  noChunk.replace(noChunk.find("\"chunk\": 64, "), 13, "");
  EXPECT_FALSE(parse_tuning_db(noChunk, "nochunk", &back, &err));
  EXPECT_NE(err.find("'chunk'"), std::string::npos) << err;
  // A value must be listed.
  std::string bad = text;
  bad.replace(bad.find("\"split\": 4"), 10, "\"split\": 3");
  EXPECT_FALSE(parse_tuning_db(bad, "bad", &back, &err));
  EXPECT_NE(err.find("split = 3"), std::string::npos) << err;
}

TEST(TuningDb, SaveLoadRoundTrip) {
  char tmpl[] = "/tmp/deltac_db_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/db.json";
  TuningDB db;
  db.records.push_back(
      record(Family::CpuChunked, DELTAC_VARIANT_GATED, 64, 64, DELTAC_F32, 0));
  std::string err;
  ASSERT_TRUE(save_tuning_db(path, db, &err)) << err;
  TuningDB back;
  ASSERT_TRUE(load_tuning_db(path, &back, &err)) << err;
  ASSERT_EQ(back.records.size(), 1u);
  EXPECT_TRUE(back.records[0].config == db.records[0].config);
  std::remove(path.c_str());
  ::rmdir(tmpl);
  EXPECT_FALSE(load_tuning_db(path, &back, &err));
  EXPECT_NE(err.find(path), std::string::npos) << err;
}

TEST(TuningDb, LookupPicksTheSmallestBucketThatHolds) {
  TuningDB db;
  db.records.push_back(
      record(Family::CpuRecurrent, DELTAC_VARIANT_GATED, 64, 64, DELTAC_F32, 0));
  db.records.back().config.tile_v = 32;
  db.records.push_back(record(Family::CpuRecurrent, DELTAC_VARIANT_GATED, 64,
                              64, DELTAC_F32, 128));
  db.records.back().config.tile_v = 16;
  db.records.push_back(
      record(Family::CpuChunked, DELTAC_VARIANT_GATED, 64, 64, DELTAC_F32, 0));
  Problem p;
  p.variant = DELTAC_VARIANT_GATED, p.K = 64, p.V = 64;
  p.max_seqlen = 100;
  const TuningRecord *r = db.lookup(Device::CPU, Mode::Recurrent, p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->config.tile_v, 16);
  p.max_seqlen = 1000;
  r = db.lookup(Device::CPU, Mode::Recurrent, p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->config.tile_v, 32);
  r = db.lookup(Device::CPU, Mode::Chunked, p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->config.family, Family::CpuChunked);
  EXPECT_EQ(db.lookup(Device::CUDA, Mode::Auto, p), nullptr);
  p.K = 128;
  EXPECT_EQ(db.lookup(Device::CPU, Mode::Auto, p), nullptr);
}

std::string wrap(const std::string &record) {
  return R"({"format": "deltac-tuning-db", "version": 2, "records": [)" +
         record + "]}";
}

struct BadCase {
  const char *what;
  std::string text;
  std::vector<std::string> mentions; // substrings of the message
};

TEST(TuningDb, ParseErrorsNameTheRecordAndField) {
  const std::string good =
      R"({"family": "cpu_recurrent", "variant": "gated", "key_dim": 128,
          "value_dim": 128, "in_dtype": "f32", "tile_v": 16})";
  const BadCase cases[] = {
      {"not json", "{\"format\": ", {"db.json", "not valid JSON"}},
      {"top level", "[]", {"db.json", "top level"}},
      {"format", R"({"format": "x", "version": 2, "records": []})",
       {"db.json", "'format'"}},
      {"version", R"({"format": "deltac-tuning-db", "version": 1, "records": []})",
       {"db.json", "'version' must be 2", "got 1"}},
      {"records", R"({"format": "deltac-tuning-db", "version": 2})",
       {"db.json", "'records'"}},
      {"record object", wrap(good + ", 3"), {"record 1 must be an object"}},
      {"unknown family",
       wrap(R"({"family": "cuda_wgmma", "variant": "gated", "key_dim": 128,
                "value_dim": 128, "in_dtype": "f32"})"),
       {"db.json", "record 0", "'family'", "cuda_chunked", "cpu_recurrent"}},
      {"unknown variant",
       wrap(R"({"family": "cpu_recurrent", "variant": "mamba", "key_dim": 128,
                "value_dim": 128, "in_dtype": "f32", "tile_v": 16})"),
       {"record 0", "'variant'", "mamba"}},
      {"knob not read",
       wrap(R"({"family": "cpu_recurrent", "variant": "gated", "key_dim": 128,
                "value_dim": 128, "in_dtype": "f32", "tile_v": 16, "warps": 4})"),
       {"record 0", "'warps'", "cpu_recurrent has no such knob"}},
      {"missing knob",
       wrap(R"({"family": "cpu_chunked", "variant": "gated", "key_dim": 128,
                "value_dim": 128, "in_dtype": "f32"})"),
       {"record 0", "'chunk'", "missing"}},
      {"illegal value",
       wrap(good + R"(, {"family": "cpu_chunked", "variant": "kda",
                "key_dim": 64, "value_dim": 64, "in_dtype": "bf16", "chunk": 48})"),
       {"db.json", "record 1", "chunk = 48", "16, 32, 64"}},
      {"bad dims",
       wrap(R"({"family": "cpu_recurrent", "variant": "gated", "key_dim": 512,
                "value_dim": 128, "in_dtype": "f32", "tile_v": 16})"),
       {"record 0", "'key_dim'", "16..256"}},
      {"cuda geometry",
       wrap(R"({"family": "cuda_recurrent", "variant": "gated", "key_dim": 128,
                "value_dim": 128, "in_dtype": "f32", "tile_v": 32, "warps": 1})"),
       {"record 0", "warps = 1"}},
      {"time", wrap(R"({"family": "cpu_recurrent", "variant": "gated", "key_dim": 128,
          "value_dim": 128, "in_dtype": "f32", "tile_v": 16, "time_us": -1})"),
       {"record 0", "'time_us'"}},
  };
  for (const BadCase &c : cases) {
    SCOPED_TRACE(c.what);
    TuningDB db;
    db.records.resize(7);
    std::string err;
    EXPECT_FALSE(parse_tuning_db(c.text, "db.json", &db, &err));
    EXPECT_EQ(db.records.size(), 7u) << "output touched on failure";
    for (const std::string &m : c.mentions)
      EXPECT_NE(err.find(m), std::string::npos) << "'" << m << "' in: " << err;
  }
  TuningDB db;
  std::string err;
  EXPECT_TRUE(parse_tuning_db(wrap(good), "db.json", &db, &err)) << err;
}

// The mode filters families: chunked takes chunked records only, recurrent
// recurrent ones, auto any family of the device.
TEST(TuningDb, LookupFiltersByModeAndDevice) {
  TuningDB db;
  db.records.push_back(record(Family::CpuRecurrent, DELTAC_VARIANT_GATED, 128,
                              128, DELTAC_BF16, 0));
  db.records.push_back(record(Family::CpuChunked, DELTAC_VARIANT_GATED, 128,
                              128, DELTAC_BF16, 4096));
  Problem p;
  p.variant = DELTAC_VARIANT_GATED, p.K = p.V = 128;
  p.in_dtype = DELTAC_BF16, p.out_dtype = DELTAC_F32;
  p.max_seqlen = 1000;
  const TuningRecord *r = db.lookup(Device::CPU, Mode::Recurrent, p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->config.family, Family::CpuRecurrent);
  r = db.lookup(Device::CPU, Mode::Chunked, p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->config.family, Family::CpuChunked);
  r = db.lookup(Device::CPU, Mode::Auto, p); // the smaller bucket
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->config.family, Family::CpuChunked);
  EXPECT_EQ(db.lookup(Device::CUDA, Mode::Auto, p), nullptr);
  p.max_seqlen = 5000; // past the chunked record's bucket
  EXPECT_EQ(db.lookup(Device::CPU, Mode::Chunked, p), nullptr);
}

// Backward records (the saved-states choice, deltac-tune --backward): round
// trip, lookup by dims, value heads and tokens per sequence.
BackwardRecord backwardRecord(int variant, int K, int V, int HV, int64_t max_tokens, bool keep) {
  BackwardRecord r;
  r.variant = variant, r.K = K, r.V = V, r.in_dtype = DELTAC_BF16, r.HV = HV;
  r.max_tokens = max_tokens, r.keep = keep;
  return r;
}

TEST(TuningDb, BackwardRecordsRoundTripAndLookUp) {
  TuningDB db;
  db.backward.push_back(backwardRecord(DELTAC_VARIANT_DELTA, 64, 64, 32, 4096, true));
  db.backward.back().time_us = 2881.5, db.backward.back().other_us = 2944.25;
  db.backward.back().env["gpu"] = "H100";
  db.backward.push_back(backwardRecord(DELTAC_VARIANT_DELTA, 64, 64, 32, 0, false));
  db.backward.push_back(backwardRecord(DELTAC_VARIANT_GATED, 128, 128, 32, 0, true));
  const std::string text = format_tuning_db(db);
  EXPECT_NE(text.find("\"saved_states\": \"keep\""), std::string::npos) << text;
  TuningDB back;
  std::string err;
  ASSERT_TRUE(parse_tuning_db(text, "mem", &back, &err)) << err;
  ASSERT_EQ(back.backward.size(), 3u);
  EXPECT_TRUE(back.records.empty());
  const BackwardRecord &a = back.backward[0];
  EXPECT_EQ(a.variant, DELTAC_VARIANT_DELTA);
  EXPECT_EQ(a.K, 64);
  EXPECT_EQ(a.HV, 32);
  EXPECT_EQ(a.max_tokens, 4096);
  EXPECT_TRUE(a.keep);
  EXPECT_EQ(a.time_us, 2881.5);
  EXPECT_EQ(a.other_us, 2944.25);
  EXPECT_EQ(a.env.at("gpu"), "H100");
  EXPECT_FALSE(back.backward[1].keep);
  EXPECT_EQ(format_tuning_db(back), text);

  // The smallest bucket holding the tokens per sequence; the unbounded one
  // beyond; nothing for other heads, dims, dtypes or variants.
  const BackwardRecord *r = back.lookup_backward(DELTAC_VARIANT_DELTA, 64, 64, DELTAC_BF16, 32, 4096);
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->keep);
  r = back.lookup_backward(DELTAC_VARIANT_DELTA, 64, 64, DELTAC_BF16, 32, 4097);
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->keep);
  EXPECT_EQ(back.lookup_backward(DELTAC_VARIANT_DELTA, 64, 64, DELTAC_BF16, 16, 100), nullptr);
  EXPECT_EQ(back.lookup_backward(DELTAC_VARIANT_GATED, 64, 64, DELTAC_BF16, 32, 100), nullptr);
  EXPECT_EQ(back.lookup_backward(DELTAC_VARIANT_DELTA, 64, 128, DELTAC_BF16, 32, 100), nullptr);
  EXPECT_EQ(back.lookup_backward(DELTAC_VARIANT_DELTA, 64, 64, DELTAC_F16, 32, 100), nullptr);

  // A database without backward records writes no "backward" key.
  TuningDB none;
  EXPECT_EQ(format_tuning_db(none).find("backward"), std::string::npos);
}

TEST(TuningDb, BackwardRecordErrorsNameTheRecordAndField) {
  auto wrapB = [](const std::string &b) {
    return R"({"format": "deltac-tuning-db", "version": 2, "records": [], "backward": )" + b +
           "}";
  };
  const std::string good = R"({"variant": "delta", "key_dim": 64, "value_dim": 64,
      "in_dtype": "bf16", "v_heads": 32, "max_tokens": 4096, "saved_states": "keep"})";
  const BadCase cases[] = {
      {"not an array", wrapB("{}"), {"db.json", "'backward' must be an array"}},
      {"not an object", wrapB("[" + good + ", 3]"), {"backward record 1 must be an object"}},
      {"choice", wrapB(R"([{"variant": "delta", "key_dim": 64, "value_dim": 64,
          "in_dtype": "bf16", "v_heads": 32, "saved_states": "sometimes"}])"),
       {"backward record 0", "'saved_states'", "\"recompute\", \"keep\"", "sometimes"}},
      {"heads", wrapB(R"([{"variant": "delta", "key_dim": 64, "value_dim": 64,
          "in_dtype": "bf16", "saved_states": "keep"}])"),
       {"backward record 0", "'v_heads'", "missing"}},
      {"not offered (kda)", wrapB(R"([{"variant": "kda", "key_dim": 64, "value_dim": 64,
          "in_dtype": "bf16", "v_heads": 8, "saved_states": "keep"}])"),
       {"backward record 0", "kda", "bwd_saves_states"}},
      {"not offered (f32)", wrapB(R"([{"variant": "gated", "key_dim": 128, "value_dim": 128,
          "in_dtype": "f32", "v_heads": 8, "saved_states": "recompute"}])"),
       {"backward record 0", "f32", "bwd_saves_states"}},
      {"not offered (K = 256)", wrapB(R"([{"variant": "gated", "key_dim": 256, "value_dim": 256,
          "in_dtype": "bf16", "v_heads": 8, "saved_states": "keep"}])"),
       {"backward record 0", "K = 256", "bwd_saves_states"}},
      {"time", wrapB(R"([{"variant": "delta", "key_dim": 64, "value_dim": 64,
          "in_dtype": "bf16", "v_heads": 32, "saved_states": "keep", "other_us": "fast"}])"),
       {"backward record 0", "'other_us'", "non-negative"}},
      {"env", wrapB(R"([{"variant": "delta", "key_dim": 64, "value_dim": 64,
          "in_dtype": "bf16", "v_heads": 32, "saved_states": "keep", "env": {"gpu": 1}}])"),
       {"backward record 0", "'env'"}},
  };
  for (const BadCase &c : cases) {
    SCOPED_TRACE(c.what);
    TuningDB db;
    db.backward.resize(3);
    std::string err;
    EXPECT_FALSE(parse_tuning_db(c.text, "db.json", &db, &err));
    EXPECT_EQ(db.backward.size(), 3u) << "output touched on failure";
    for (const std::string &m : c.mentions)
      EXPECT_NE(err.find(m), std::string::npos) << "'" << m << "' in: " << err;
  }
  TuningDB db;
  std::string err;
  EXPECT_TRUE(parse_tuning_db(wrapB("[" + good + "]"), "db.json", &db, &err)) << err;
  ASSERT_EQ(db.backward.size(), 1u);
  EXPECT_TRUE(db.backward[0].keep);
}

} // namespace
} // namespace deltac
