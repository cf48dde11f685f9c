// .npy reader/writer: round trips, numpy-style headers, targeted corruptions
// and fuzzing (random bytes, truncations and mutations of valid files).
#include "deltac/npy.h"

#include "test_util.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

namespace deltac {
namespace {

using npy::Array;
using npy::DType;

// A .npy file with a hand-written header, padded like numpy does.
std::string makeNpy(const std::string &dict, const std::string &data,
                    int major = 1) {
  std::string h = dict;
  size_t pre = major == 1 ? 10 : 12;
  while ((pre + h.size() + 1) % 64 != 0)
    h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += char(major);
  out += char(0);
  out += char(h.size() & 0xff);
  out += char((h.size() >> 8) & 0xff);
  if (major != 1) {
    out += char(0);
    out += char(0);
  }
  return out + h + data;
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(&s[0], v.begin(), s.size());
  return s;
}

bool parseStr(const std::string &bytes, Array *a, std::string *err) {
  return npy::parse(bytes.data(), bytes.size(), a, err);
}

// Expects parse failure with a message containing `what`.
void expectBad(const std::string &bytes, const std::string &what) {
  Array a;
  std::string err;
  EXPECT_FALSE(parseStr(bytes, &a, &err)) << "accepted; expected: " << what;
  EXPECT_NE(err.find(what), std::string::npos)
      << "message '" << err << "' lacks '" << what << "'";
  EXPECT_EQ(err.find('\n'), std::string::npos);
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

TEST(Npy, RoundTripAllDtypes) {
  test::TempDir dir;
  std::mt19937_64 rng(test::freshSeed());
  const DType types[] = {DType::F16, DType::F32, DType::F64, DType::I8,
                         DType::I16, DType::I32, DType::I64, DType::U8,
                         DType::U16, DType::U32, DType::U64, DType::Bool};
  for (DType t : types) {
    std::vector<int64_t> shape = {2, 3, 5};
    size_t bytes = 30 * npy::item_size(t);
    std::vector<unsigned char> data(bytes);
    for (auto &b : data)
      b = (unsigned char)rng();
    std::string path = dir.file(std::string("a_") + npy::name(t) + ".npy");
    std::string err;
    ASSERT_TRUE(npy::write_file(path, t, shape, data.data(), &err)) << err;
    Array a;
    ASSERT_TRUE(npy::read_file(path, &a, &err)) << npy::name(t) << ": " << err;
    EXPECT_EQ(a.dtype, t);
    EXPECT_EQ(a.shape, shape);
    EXPECT_EQ(a.data, data);
    // In-memory encode/parse agree with the file path.
    std::string enc = npy::encode(t, shape, data.data());
    Array b;
    ASSERT_TRUE(parseStr(enc, &b, &err)) << err;
    EXPECT_EQ(b.data, data);
    EXPECT_EQ(enc.size() % 64, bytes % 64) << "data starts 64-byte aligned";
  }
}

TEST(Npy, RoundTripShapes) {
  test::TempDir dir;
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {1}, {7}, {0}, {3, 0, 2}, {1, 1, 1, 1, 1}, {2, 3, 4, 5}};
  for (const auto &shape : shapes) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      x[size_t(i)] = float(i) * 0.5f - 3.0f;
    std::string path = dir.file("s.npy"), err;
    ASSERT_TRUE(npy::write_file(path, DType::F32, shape, x.data(), &err));
    Array a;
    ASSERT_TRUE(npy::read_file(path, &a, &err)) << err;
    EXPECT_EQ(a.shape, shape);
    EXPECT_EQ(a.count(), n);
    ASSERT_EQ(a.data.size(), size_t(n) * 4);
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(a.as<float>()[i], x[size_t(i)]);
  }
}

TEST(Npy, ShapeStr) {
  EXPECT_EQ(npy::shape_str({}), "()");
  EXPECT_EQ(npy::shape_str({4}), "(4,)");
  EXPECT_EQ(npy::shape_str({2, 3}), "(2, 3)");
}

TEST(Npy, NumpyStyleHeaders) {
  Array a;
  std::string err;
  // What numpy writes.
  ASSERT_TRUE(parseStr(makeNpy("{'descr': '<f4', 'fortran_order': False, "
                               "'shape': (3,), }",
                               floats({1, 2, 3})),
                       &a, &err))
      << err;
  EXPECT_EQ(a.shape, std::vector<int64_t>({3}));
  EXPECT_EQ(a.as<float>()[2], 3.0f);
  // Other key order, double quotes, no trailing comma, extra spaces, 'L'.
  ASSERT_TRUE(parseStr(makeNpy("{ \"shape\" : ( 1 , 2L ) , \"descr\":'<f4',"
                               "'fortran_order':False}",
                               floats({1, 2})),
                       &a, &err))
      << err;
  EXPECT_EQ(a.shape, std::vector<int64_t>({1, 2}));
  // Version 2 and 3 headers, native byte order '=', one-byte '|u1'.
  ASSERT_TRUE(parseStr(makeNpy("{'descr': '=f4', 'fortran_order': False, "
                               "'shape': (1,), }",
                               floats({5}), 2),
                       &a, &err))
      << err;
  EXPECT_EQ(a.dtype, DType::F32);
  ASSERT_TRUE(parseStr(makeNpy("{'descr': '|u1', 'fortran_order': False, "
                               "'shape': (2,), }",
                               "ab", 3),
                       &a, &err))
      << err;
  EXPECT_EQ(a.dtype, DType::U8);
  // Scalars and fortran order of a 1-D array (same bytes as C order).
  ASSERT_TRUE(parseStr(makeNpy("{'descr': '<f4', 'fortran_order': True, "
                               "'shape': (2,), }",
                               floats({1, 2})),
                       &a, &err))
      << err;
  ASSERT_TRUE(parseStr(makeNpy("{'descr': '<i8', 'fortran_order': False, "
                               "'shape': (), }",
                               std::string(8, '\1')),
                       &a, &err))
      << err;
  EXPECT_EQ(a.count(), 1);
}

TEST(Npy, LargeHeaderUsesVersion2) {
  std::vector<int64_t> shape(64, 1); // long shape tuple is still small
  float x = 1.0f;
  std::string enc = npy::encode(DType::F32, shape, &x);
  Array a;
  std::string err;
  ASSERT_TRUE(parseStr(enc, &a, &err)) << err;
  EXPECT_EQ(a.shape.size(), 64u);
}

const std::string kDict =
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";

TEST(Npy, BadMagic) {
  std::string f = makeNpy(kDict, floats({1, 2}));
  f[1] = 'X';
  expectBad(f, "bad magic");
  expectBad("PK\x03\x04 this is a zip file, not npy", "bad magic");
}

TEST(Npy, TooShort) {
  expectBad("", "truncated");
  expectBad("\x93NUMPY\x01", "truncated");
  expectBad(std::string("\x93NUMPY\x02\x00\x10", 9), "truncated");
}

TEST(Npy, BadVersion) {
  std::string f = makeNpy(kDict, floats({1, 2}));
  f[6] = 4;
  expectBad(f, "version 4");
  f[6] = 0;
  expectBad(f, "version 0");
}

TEST(Npy, TruncatedHeaderAndData) {
  std::string f = makeNpy(kDict, floats({1, 2}));
  expectBad(f.substr(0, 40), "header cut short");
  expectBad(f.substr(0, f.size() - 1), "truncated");
  expectBad(f.substr(0, f.size() - 8), "needs 8 data bytes, found 0");
}

TEST(Npy, TrailingBytes) {
  expectBad(makeNpy(kDict, floats({1, 2, 3})), "4 unexpected bytes");
}

TEST(Npy, BigEndian) {
  expectBad(makeNpy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
                    floats({1, 2})),
            "big-endian");
}

TEST(Npy, FortranOrder) {
  expectBad(
      makeNpy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
              floats({1, 2, 3, 4})),
      "fortran_order");
}

TEST(Npy, UnsupportedDtypes) {
  expectBad(makeNpy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
                    floats({1, 2})),
            "unsupported dtype '<c8'");
  expectBad(makeNpy("{'descr': '|f4', 'fortran_order': False, 'shape': (1,), }",
                    floats({1})),
            "unsupported dtype");
  expectBad(makeNpy("{'descr': [('a', '<f4')], 'fortran_order': False, "
                    "'shape': (1,), }",
                    floats({1})),
            "structured");
  expectBad(makeNpy("{'descr': '<U8', 'fortran_order': False, 'shape': (1,), }",
                    floats({1})),
            "unsupported dtype");
}

TEST(Npy, BadDicts) {
  const std::string d = floats({1, 2});
  expectBad(makeNpy("'descr': '<f4', 'fortran_order': False, 'shape': (2,)", d),
            "expected '{'");
  expectBad(makeNpy("{'descr': '<f4', 'fortran_order': False}", d),
            "expected keys");
  expectBad(makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), "
                    "'extra': 1}",
                    d),
            "unexpected key 'extra'");
  expectBad(makeNpy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                    "'shape': (2,)}",
                    d),
            "duplicate key 'descr'");
  expectBad(makeNpy("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", d),
            "True or False");
  expectBad(makeNpy("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,)}",
                    d),
            "True or False");
  expectBad(makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", d),
            "tuple");
  expectBad(makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
                    d),
            "negative");
  expectBad(makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
                    d),
            "trailing");
  expectBad(makeNpy("{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", d),
            "expected ',' or '}'");
  expectBad(makeNpy("{'descr: '<f4', 'fortran_order': False, 'shape': (2,)}", d),
            "bad header");
  expectBad(makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2 2)}",
                    d),
            "in 'shape'");
  expectBad(makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,),"
                    " \xc3\xa9}",
                    d),
            "non-ASCII");
}

TEST(Npy, HugeShapes) {
  const std::string d = floats({1, 2});
  // Product overflows 64 bits.
  expectBad(makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': "
                    "(4294967296, 4294967296, 16), }",
                    d),
            "too large");
  // A single dimension beyond 2^62.
  expectBad(makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': "
                    "(99999999999999999999999,), }",
                    d),
            "below 2^62");
  // Plausible but far larger than the file: no allocation, clear error.
  expectBad(makeNpy("{'descr': '<f8', 'fortran_order': False, 'shape': "
                    "(1000000, 1000000), }",
                    d),
            "truncated");
  // Product overflow hidden behind a zero dimension is fine (empty array).
  Array a;
  std::string err;
  EXPECT_TRUE(parseStr(makeNpy("{'descr': '<f4', 'fortran_order': False, "
                               "'shape': (0, 4611686018427387904), }",
                               ""),
                       &a, &err))
      << err;
}

TEST(Npy, HeaderLengthBeyondFile) {
  std::string f = makeNpy(kDict, floats({1, 2}));
  f[8] = char(0xff);
  f[9] = char(0xff);
  expectBad(f, "header cut short");
  std::string g = makeNpy(kDict, floats({1, 2}), 2);
  g[11] = char(0x7f); // 2 GiB header
  expectBad(g, "exceeds 1 MiB");
}

TEST(Npy, ReadFileErrors) {
  test::TempDir dir;
  Array a;
  std::string err;
  EXPECT_FALSE(npy::read_file(dir.file("missing.npy"), &a, &err));
  EXPECT_EQ(err, "file not found");
  EXPECT_FALSE(npy::read_file(dir.path(), &a, &err));
  EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
  writeBytes(dir.file("empty.npy"), "");
  EXPECT_FALSE(npy::read_file(dir.file("empty.npy"), &a, &err));
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
}

// A FIFO is refused at once: opening it must not wait for a writer.
TEST(Npy, FifoIsRefusedWithoutBlocking) {
  test::TempDir dir;
  std::string fifo = dir.file("q.npy");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Array a;
  std::string err;
  bool ok = true;
  EXPECT_TRUE(test::finishesDespiteFifo(
      fifo, [&] { ok = npy::read_file(fifo, &a, &err); }))
      << "read_file blocked on a FIFO";
  EXPECT_FALSE(ok);
  EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
}

TEST(Npy, WriteFileErrorsLeaveNothing) {
  test::TempDir dir;
  float x = 1.0f;
  std::string err;
  EXPECT_FALSE(npy::write_file(dir.file("no/such/dir/o.npy"), DType::F32, {1},
                               &x, &err));
  EXPECT_NE(err.find("cannot create"), std::string::npos) << err;
  // Replacing an existing file is atomic and leaves no temporary behind.
  ASSERT_TRUE(npy::write_file(dir.file("o.npy"), DType::F32, {1}, &x, &err));
  x = 2.0f;
  ASSERT_TRUE(npy::write_file(dir.file("o.npy"), DType::F32, {1}, &x, &err));
  EXPECT_EQ(test::listDir(dir.path()), std::vector<std::string>({"o.npy"}));
  Array a;
  ASSERT_TRUE(npy::read_file(dir.file("o.npy"), &a, &err));
  EXPECT_EQ(a.as<float>()[0], 2.0f);
}

// Whatever parse returns must be self-consistent.
void checkConsistent(const std::string &bytes) {
  Array a;
  std::string err;
  if (npy::parse(bytes.data(), bytes.size(), &a, &err)) {
    ASSERT_EQ(a.data.size(), size_t(a.count()) * npy::item_size(a.dtype));
  } else {
    ASSERT_FALSE(err.empty());
    ASSERT_EQ(err.find('\n'), std::string::npos);
  }
}

TEST(NpyFuzz, RandomBytes) {
  uint64_t seed = test::freshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 20000; ++i) {
    size_t n = rng() % 200;
    std::string s(n, '\0');
    for (char &c : s)
      c = char(rng());
    // Half of them start with a valid magic and version to get further.
    if (i % 2 && n >= 8)
      std::memcpy(&s[0], "\x93NUMPY\x01\x00", 8);
    checkConsistent(s);
  }
}

TEST(NpyFuzz, EveryTruncation) {
  std::vector<float> x(37);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(i);
  for (int major : {1, 2}) {
    std::string f = major == 1 ? npy::encode(DType::F32, {37}, x.data())
                               : makeNpy("{'descr': '<f4', 'fortran_order': "
                                         "False, 'shape': (37,), }",
                                         std::string(reinterpret_cast<char *>(
                                                          x.data()),
                                                      x.size() * 4),
                                         2);
    Array a;
    std::string err;
    ASSERT_TRUE(parseStr(f, &a, &err)) << err;
    for (size_t n = 0; n < f.size(); ++n) {
      EXPECT_FALSE(parseStr(f.substr(0, n), &a, &err)) << "prefix " << n;
      EXPECT_FALSE(err.empty());
    }
  }
}

TEST(NpyFuzz, Mutations) {
  uint64_t seed = test::freshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  std::vector<int32_t> x(24, 7);
  const std::string valid = npy::encode(DType::I32, {2, 3, 4}, x.data());
  const size_t headerEnd = valid.size() - 96;
  const char interesting[] = "0123456789(),:' {}<>|=fiubTFLe-\n\x93";
  for (int i = 0; i < 30000; ++i) {
    std::string s = valid;
    int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % headerEnd; // mostly the preamble and header
      switch (rng() % 4) {
      case 0:
        s[pos] = char(rng());
        break;
      case 1:
        s[pos] = interesting[rng() % (sizeof(interesting) - 1)];
        break;
      case 2:
        s.erase(pos, 1 + rng() % 3);
        break;
      default:
        s.insert(pos, 1, interesting[rng() % (sizeof(interesting) - 1)]);
        break;
      }
    }
    checkConsistent(s);
  }
}

TEST(NpyFuzz, FilesOnDisk) {
  // read_file takes a different path (streamed header, then data).
  uint64_t seed = test::freshSeed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  test::TempDir dir;
  std::vector<float> x(10, 1.5f);
  const std::string valid = npy::encode(DType::F32, {10}, x.data());
  const std::string path = dir.file("f.npy");
  for (int i = 0; i < 600; ++i) {
    std::string s = valid;
    if (i % 3 == 0)
      s.resize(rng() % s.size());
    else
      s[rng() % 80] = char(rng());
    writeBytes(path, s);
    Array a, b;
    std::string e1, e2;
    bool fromFile = npy::read_file(path, &a, &e1);
    bool fromMem = npy::parse(s.data(), s.size(), &b, &e2);
    ASSERT_EQ(fromFile, fromMem) << e1 << " / " << e2;
    if (fromFile) {
      EXPECT_EQ(a.shape, b.shape);
      EXPECT_EQ(a.data, b.data);
    } else {
      EXPECT_EQ(e1, e2);
    }
  }
}

} // namespace
} // namespace deltac
