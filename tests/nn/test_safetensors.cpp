// The safetensors reader on valid files, on each kind of malformed file (a
// clear error naming the file, offset or tensor) and on thousands of random
// mutations of a valid file through the fuzz entry point (no crash, no
// out-of-bounds read: run under ASan to be sure).
#include "deltac/safetensors.h"
#include "deltac/test_seed.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

using deltac::SafeTensors;

std::vector<uint8_t> valid() {
  return deltac::safetensors_bytes(
      {{"a.weight", {{2, 3}, {1, 2, 3, 4, 5, 6}}}, {"b", {{4}, {7, 8, 9, 10}}}},
      {{"layer", "deltanet"}});
}

// A file from a header text and a data section.
std::vector<uint8_t> file(const std::string &header, size_t data_bytes) {
  std::vector<uint8_t> f(8 + header.size() + data_bytes, 0);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) f[size_t(i)] = uint8_t(n >> (8 * i));
  std::memcpy(f.data() + 8, header.data(), header.size());
  return f;
}

std::string parse_error(const std::vector<uint8_t> &f) {
  SafeTensors st;
  std::string err;
  EXPECT_FALSE(st.parse(f.data(), f.size(), "w.safetensors", &err));
  return err;
}

TEST(SafeTensors, ReadsValidFile) {
  auto f = valid();
  SafeTensors st;
  std::string err;
  ASSERT_TRUE(st.parse(f.data(), f.size(), "w.safetensors", &err)) << err;
  std::vector<float> v;
  ASSERT_TRUE(st.get_f32("a.weight", {2, 3}, &v, &err)) << err;
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(st.get_f32("b", {4}, &v, &err)) << err;
  EXPECT_EQ(v[3], 10.0f);
  EXPECT_EQ(st.metadata().at("layer"), "deltanet");
}

TEST(SafeTensors, ConvertsBf16AndF16) {
  // bf16 1.5 = 0x3fc0; f16 -2.5 = 0xc100, f16 subnormal 2^-24 = 0x0001.
  auto f = file(R"({"x":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},)"
                R"("y":{"dtype":"F16","shape":[2],"data_offsets":[2,6]}})", 6);
  const size_t d = f.size() - 6;
  f[d] = 0xc0; f[d + 1] = 0x3f; f[d + 2] = 0x00; f[d + 3] = 0xc1; f[d + 4] = 0x01; f[d + 5] = 0x00;
  SafeTensors st;
  std::string err;
  ASSERT_TRUE(st.parse(f.data(), f.size(), "h", &err)) << err;
  std::vector<float> v;
  ASSERT_TRUE(st.get_f32("x", {1}, &v, &err)) << err;
  EXPECT_EQ(v[0], 1.5f);
  ASSERT_TRUE(st.get_f32("y", {2}, &v, &err)) << err;
  EXPECT_EQ(v[0], -2.5f);
  EXPECT_EQ(v[1], std::ldexp(1.0f, -24));
}

TEST(SafeTensors, Truncated) {
  auto f = valid();
  f.resize(5);
  EXPECT_NE(parse_error(f).find("truncated"), std::string::npos);
  f = valid();
  f.resize(f.size() - 3); // the data of the last tensor cut short
  const std::string e = parse_error(f);
  EXPECT_NE(e.find("tensor 'b'"), std::string::npos) << e;
  EXPECT_NE(e.find("past the end"), std::string::npos) << e;
}

TEST(SafeTensors, HeaderLengthPastEndOrAbsurd) {
  auto f = valid();
  f[0] = 0xff; f[1] = 0xff; f[2] = 0x00;
  EXPECT_NE(parse_error(f).find("runs past the end of the file"), std::string::npos);
  f[7] = 0x7f;
  EXPECT_NE(parse_error(f).find("absurd"), std::string::npos);
}

TEST(SafeTensors, MalformedJson) {
  EXPECT_NE(parse_error(file("{\"a\": [", 0)).find("malformed JSON"), std::string::npos);
  EXPECT_NE(parse_error(file("[1, 2]", 0)).find("not an object"), std::string::npos);
  EXPECT_NE(parse_error(file(R"({"a":{"dtype":"F32","shape":[1]}})", 4)).find("tensor 'a'"),
            std::string::npos);
  EXPECT_NE(parse_error(file(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}})", 4))
                .find("unknown dtype 'Q4'"), std::string::npos);
  EXPECT_NE(parse_error(file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4))
                .find("tensor 'a'"), std::string::npos);
}

TEST(SafeTensors, OffsetsOutOfRangeReversedOrOverlapping) {
  std::string e = parse_error(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4));
  EXPECT_NE(e.find("tensor 'a'"), std::string::npos) << e;
  EXPECT_NE(e.find("past the end"), std::string::npos) << e;
  e = parse_error(file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4));
  EXPECT_NE(e.find("reversed"), std::string::npos) << e;
  e = parse_error(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12));
  EXPECT_NE(e.find("overlap"), std::string::npos) << e;
  e = parse_error(file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8));
  EXPECT_NE(e.find("needs 12"), std::string::npos) << e;
  e = parse_error(file(R"({"a":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,8]}})", 8));
  EXPECT_NE(e.find("absurd"), std::string::npos) << e;
}

TEST(SafeTensors, MissingWrongShapeWrongDtype) {
  auto f = valid();
  SafeTensors st;
  std::string err;
  ASSERT_TRUE(st.parse(f.data(), f.size(), "w.safetensors", &err));
  std::vector<float> v;
  EXPECT_FALSE(st.get_f32("c.weight", {1}, &v, &err));
  EXPECT_EQ(err, "w.safetensors: tensor 'c.weight' is missing");
  EXPECT_FALSE(st.get_f32("a.weight", {3, 2}, &v, &err));
  EXPECT_EQ(err, "w.safetensors: tensor 'a.weight': shape (2, 3), expected (3, 2)");
  auto g = file(R"({"i":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})", 4);
  ASSERT_TRUE(st.parse(g.data(), g.size(), "w.safetensors", &err)) << err;
  EXPECT_FALSE(st.get_f32("i", {1}, &v, &err));
  EXPECT_EQ(err, "w.safetensors: tensor 'i': dtype I32, expected F32, BF16 or F16");
}

TEST(SafeTensors, FailedParseHoldsNoTensor) {
  // The first tensor is valid, the second runs past the end: nothing is kept.
  auto f = file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                R"("b":{"dtype":"F32","shape":[4],"data_offsets":[4,20]}})", 8);
  SafeTensors st;
  std::string err;
  EXPECT_FALSE(st.parse(f.data(), f.size(), "w", &err));
  EXPECT_TRUE(st.tensors().empty());
  std::vector<float> v;
  EXPECT_FALSE(st.get_f32("a", {1}, &v, &err));
  EXPECT_EQ(err, "w: tensor 'a' is missing");
}

TEST(SafeTensors, MissingFile) {
  SafeTensors st;
  std::string err;
  EXPECT_FALSE(st.load("/nonexistent/w.safetensors", &err));
  EXPECT_NE(err.find("/nonexistent/w.safetensors"), std::string::npos);
}

// Random mutations of a valid file (byte flips, header-length edits,
// truncations, header text splices) through the fuzz entry point.
TEST(SafeTensors, FuzzMutations) {
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::printf("SafeTensors.FuzzMutations: DELTAC_TEST_SEED=%llu\n", (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  const auto base = valid();
  const char *tokens[] = {"\"", "{", "}", "[", "]", ",", ":", "-1", "99999999999999999999",
                          "1e400", "\"F16\"", "\"BF16\"", "\"I8\"", "null", "true", "0"};
  for (int it = 0; it < 5000; ++it) {
    std::vector<uint8_t> f = base;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 5) {
      case 0: f[rng() % f.size()] ^= uint8_t(1u << (rng() % 8)); break;
      case 1: f[rng() % f.size()] = uint8_t(rng()); break;
      case 2: f.resize(rng() % (f.size() + 1)); if (f.empty()) f.push_back(0); break;
      case 3: if (f.size() >= 8) f[rng() % 8] = uint8_t(rng()); break;
      default: {
        const std::string t = tokens[rng() % (sizeof(tokens) / sizeof(*tokens))];
        const size_t at = 8 + rng() % (f.size() > 8 ? f.size() - 8 : 1);
        if (at <= f.size()) f.insert(f.begin() + long(at), t.begin(), t.end());
      }
      }
    }
    LLVMFuzzerTestOneInput(f.data(), f.size());
  }
}

} // namespace
