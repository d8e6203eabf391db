// UTF-8 helpers for the tokenizer, and the GPT-2 byte-level alphabet.
//
// Byte-level BPE (GPT-2, Llama 3, Qwen2) never sees raw bytes: every byte 0..255 is first
// mapped to one printable code point (bytes that are printable Latin-1 map to themselves, the
// other 68 map to U+0100.. in order), so "hello world" becomes "helloĠworld". ByteToUnicode()
// and UnicodeToByte() are that bijection. Utf8Lossy() turns decoded bytes back into valid UTF-8,
// replacing each maximal invalid subsequence with U+FFFD exactly as Rust's
// String::from_utf8_lossy does (so decode() matches Hugging Face `tokenizers`).
// Thread safety: pure functions over immutable tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace air::engine {

// Length in bytes of the well-formed UTF-8 sequence starting at s[pos], or 0 if the bytes there
// do not form one (bad lead byte, bad continuation, overlong, surrogate, > U+10FFFF, truncated).
size_t Utf8SequenceLength(std::string_view s, size_t pos);

// Decodes the code point at s[pos] (which must start a well-formed sequence; see above).
char32_t DecodeUtf8At(std::string_view s, size_t pos, size_t* length);

// Appends the UTF-8 encoding of `cp` (<= U+10FFFF, not a surrogate).
void AppendUtf8(char32_t cp, std::string* out);

// Python's str.isspace() for one code point (Unicode White_Space plus U+001C..U+001F).
bool IsPythonWhiteSpace(char32_t cp);

// Number of code points in valid UTF-8 text.
size_t CountCodePoints(std::string_view s);

// Valid UTF-8 from arbitrary bytes: each maximal invalid subpart becomes U+FFFD.
std::string Utf8Lossy(std::string_view bytes);

// The GPT-2 byte-level alphabet: the UTF-8 text (2 bytes at most) of the code point that stands
// for `byte`.
std::string_view ByteToUnicode(uint8_t byte);

// The byte a byte-level code point stands for, or -1 when `cp` is not in the alphabet.
int UnicodeToByte(char32_t cp);

// Maps every byte of `bytes` through ByteToUnicode and appends the result.
void AppendByteLevel(std::string_view bytes, std::string* out);

// Maps a byte-level token back to bytes. Returns false (and leaves `out` unchanged) if some code
// point is not in the alphabet.
bool ByteLevelToBytes(std::string_view token, std::string* out);

}  // namespace air::engine
