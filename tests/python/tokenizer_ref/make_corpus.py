#!/usr/bin/env python3
"""Deterministic multilingual corpus for tokenizer parity tests.

Writes N texts (default 6000) as JSON lines (one JSON string per line, so texts may hold
newlines, tabs and any Unicode). The mix: English sentences with contractions, Python and C
code, Chinese / Japanese / Korean text, emoji (ZWJ sequences, skin tones, flags, keycaps),
runs of spaces, tabs and newlines, long digit strings, accented text in NFC and NFD forms
(exercising the NFC normalizer), other scripts, unusual white space (NBSP, U+3000, U+0085,
U+180E, U+2028), special tokens embedded in text (whole and truncated), and a few long or
pathological strings. The same seed always gives the same file (random.Random is
deterministic across platforms for these calls).

    python make_corpus.py OUT.jsonl [--lines N] [--seed S]
"""
import argparse
import json
import random
import unicodedata

WORDS = ("the quick brown fox jumps over lazy dog model training data token layer weight "
         "gradient loss batch epoch learning rate optimizer cluster node rank world size "
         "checkpoint shard memory kernel tensor matrix vector attention head embedding "
         "hello world python code file line error value result system process thread "
         "queue server client request response network packet").split()
CONTRACTIONS = ["don't", "I'm", "we'll", "they've", "she'd", "IT'S", "You'RE", "can't",
                "won't", "it's", "he'll", "we'd", "'tis", "o'clock", "rock'n'roll", "WE'VE"]
NAMES = ["Alice", "Bob", "Ünal", "José", "Zoë", "Łukasz", "Renée", "Ólafur", "McDonald"]
CODE_LINES = [
    "def forward(self, x: torch.Tensor) -> torch.Tensor:",
    "    return self.proj(F.silu(self.gate(x)) * self.up(x))",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}",
    "if __name__ == '__main__':\n    main()",
    "x = [i**2 for i in range(10) if i % 3 != 0]",
    "const auto& [key, value] = *map.find(\"answer\");",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "    }\n\n    // TODO(someone): handle EOF\n",
    "lambda x, y: (x << 2) | (y >> 3) ^ 0xFF",
    "std::vector<std::pair<int, float>> v{{1, 2.5f}, {3, -0.25f}};",
    "\t\tself.assertEqual(result, {'a': 1, \"b\": [2, 3]})",
    "fn main() { println!(\"{:?}\", vec![1, 2, 3]); }",
    "$ ls -la /tmp && echo \"done\" >> log.txt 2>&1",
]
CHINESE = ["我们今天训练一个大型语言模型。", "数据并行和张量并行可以一起使用。", "你好，世界！",
           "机器学习需要大量的计算资源和高质量的数据。", "这个模型的损失在下降。",
           "北京、上海和深圳都是大城市。", "请把结果保存到检查点目录中。"]
JAPANESE = ["今日はいい天気ですね。", "モデルの学習が終わりました！", "東京都渋谷区でラーメンを食べた。",
            "カタカナとひらがなと漢字が混ざっています。", "ｶﾀｶﾅ（半角）も使います。",
            "「こんにちは」と彼女は言った。", "データセットを読み込んでいます…"]
KOREAN = ["안녕하세요, 세계!", "모델 학습이 끝났습니다.", "서울은 대한민국의 수도입니다.",
          "한국어 토크나이저를 시험합니다.", "데이터를 불러오는 중입니다..."]
OTHER_SCRIPTS = ["Привет, мир! Как дела?", "Γειά σου Κόσμε", "مرحبا بالعالم", "שלום עולם",
                 "नमस्ते दुनिया, यह एक परीक्षण है।", "สวัสดีชาวโลก", "Xin chào thế giới",
                 "Ça va? Très bien, merci — à bientôt!", "Straße, Größe, Fußgänger",
                 "ﬁnancial ﬂow (ligatures)", "Ⅻ ½ ² ³ ⁴ ① ② ③ ٣٤٥ ६७८"]
EMOJI = ["😀", "🤖", "🚀", "🔥", "✅", "❤️", "👍🏽", "👋🏿", "👨‍👩‍👧‍👦", "🧑🏽‍💻", "👩‍❤️‍💋‍👨",
         "🏳️‍🌈", "🇯🇵", "🇺🇸", "🇰🇷", "1️⃣", "#️⃣", "🫠", "🪐", "☕", "⚡️", "🏴‍☠️", "🤷‍♀️"]
ODD_SPACES = ["\u00a0", "\u3000", "\u0085", "\u180e", "\u2028", "\u2029", "\u2009", "\u200b",
              "\u202f", "\u205f", "\u1680", "\x0b", "\x0c", "\r\n", "\r"]
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
            "<|end_header_id|>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>",
            "</think>", "<mask>"]
PARTIAL_SPECIALS = ["<|im_", "<|eot_id", "|>", "<|", "<|im_start", "<think", "im_end|>"]
ACCENTED = ["café", "naïve", "résumé", "Ångström", "Piñata", "Crème brûlée", "Dvořák",
            "coöperate", "Ελληνικά", "Tiếng Việt"]


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
    for _ in range(rng.randint(0, 2)):
        words.insert(rng.randrange(len(words) + 1), rng.choice(CONTRACTIONS))
    if rng.random() < 0.3:
        words.insert(0, rng.choice(NAMES))
    text = " ".join(words)
    if rng.random() < 0.5:
        text = text[0].upper() + text[1:]
    return text + rng.choice([".", "!", "?", "...", ";", ":", ",", " —", ""])


def number(rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        return str(rng.randrange(10 ** rng.randint(1, 25)))
    if kind == 1:
        return f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 9)}f}"
    if kind == 2:
        return f"{rng.randrange(10**9):,}"
    if kind == 3:
        return f"{rng.random():.3e}"
    return f"v{rng.randint(0, 9)}.{rng.randint(0, 99)}.{rng.randint(0, 999)}"


def whitespace_run(rng: random.Random) -> str:
    return "".join(rng.choice([" ", " ", "  ", "\t", "\n", "\n\n", "    ", "\r\n"])
                   for _ in range(rng.randint(1, 8)))


def accented(rng: random.Random) -> str:
    word = rng.choice(ACCENTED)
    return unicodedata.normalize(rng.choice(["NFC", "NFD", "NFC"]), word)


def emoji_run(rng: random.Random) -> str:
    return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4)))


def cjk(rng: random.Random) -> str:
    pool = rng.choice([CHINESE, JAPANESE, KOREAN])
    text = rng.choice(pool)
    if pool is KOREAN and rng.random() < 0.3:
        text = unicodedata.normalize("NFD", text)  # decomposed jamo: NFC recomposes them
    return text


PARTS = [
    (sentence, 30), (number, 6), (whitespace_run, 8), (accented, 5), (emoji_run, 6), (cjk, 14),
    (lambda r: r.choice(CODE_LINES), 12), (lambda r: r.choice(OTHER_SCRIPTS), 6),
    (lambda r: r.choice(SPECIALS), 6), (lambda r: r.choice(PARTIAL_SPECIALS), 2),
    (lambda r: r.choice(ODD_SPACES), 4),
]


def text_line(rng: random.Random) -> str:
    makers, weights = zip(*PARTS)
    pieces = [rng.choices(makers, weights)[0](rng) for _ in range(rng.randint(1, 6))]
    glue = rng.choice(["", " ", " ", "\n", ""])
    return glue.join(pieces)


def pathological(rng: random.Random, index: int) -> str:
    choices = [
        " " * rng.randint(50, 400),
        "\n" * rng.randint(2, 50) + "end",
        "a" * rng.randint(100, 600),
        "".join(rng.choice("abcdefghij") for _ in range(800)),
        "9" * rng.randint(30, 200),
        "word" + "\t" * 20 + "word",
        "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(300)),
        "".join(chr(rng.randint(0x20, 0x7E)) for _ in range(200)),
        "".join(chr(rng.randint(0xA0, 0x24F)) for _ in range(100)),
        "".join(chr(rng.randint(0x1F300, 0x1FAFF)) for _ in range(60)),
        "\x00\x01\x02 control \x1b[31mred\x1b[0m \x7f",
        "e" + "\u0301" * 10 + " a\u0308\u0304 \u1100\u1161\u11a8",  # combining marks, jamo
        "",
        "<|im_start|><|im_end|><|im_start|>" * 3,
        "<|eot_id|>\n\n<|begin_of_text|>  <|end_of_text|>",
        " <mask> a<mask> <mask>b\t<mask>\n",
        "'s 'S 'ſ 'll 'LL 'Re",
    ]
    return choices[index % len(choices)]


def make(lines: int, seed: int) -> list:
    rng = random.Random(seed)
    out = []
    for i in range(lines):
        out.append(pathological(rng, i // 50) if i % 50 == 49 else text_line(rng))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--lines", type=int, default=6000)
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()
    with open(args.out, "w", encoding="utf-8") as f:
        for text in make(args.lines, args.seed):
            f.write(json.dumps(text, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
