"""Parameter counts of the built-in presets, for `plan --list`.

Counting every preset takes two abstract builds each, most of a minute
in all, and even importing Keras takes longer than a listing should:
`python -m keras_nlp plan --list` prints this table as it is. Each entry
is `preset: (parameters, digest of its config)`;
`keras_nlp.preset_counting.preset_parameter_count` uses an entry only while the
preset's config has that digest, and `tests/test_cli.py` fails until the
table is written again after a preset is added or changed:

    python -m keras_nlp.preset_counting
"""

COUNTS = {
    "AlbertBackbone": {
        "albert_base_en_uncased": (11_683_584, "05df0965"),
        "albert_large_en_uncased": (17_683_968, "fd3d7f41"),
        "albert_extra_large_en_uncased": (58_724_864, "f0675747"),
        "albert_extra_extra_large_en_uncased": (222_595_584, "bfaf9f57"),
    },
    "BartBackbone": {
        "bart_base_en": (139_417_344, "254524b2"),
        "bart_large_en": (406_287_360, "567a0e60"),
        "bart_large_en_cnn": (406_286_336, "87113c90"),
    },
    "BertBackbone": {
        "bert_tiny_en_uncased": (4_385_920, "ff068548"),
        "bert_small_en_uncased": (28_763_648, "77fdd7c2"),
        "bert_medium_en_uncased": (41_373_184, "ef6ace86"),
        "bert_base_en_uncased": (109_482_240, "4766cc20"),
        "bert_base_en": (108_310_272, "d52fc829"),
        "bert_large_en_uncased": (335_141_888, "13f06b52"),
    },
    "BloomBackbone": {
        "bloom_560m_multi": (559_214_592, "50749a76"),
        "bloom_3b_multi": (3_002_557_440, "74269478"),
    },
    "DebertaV3Backbone": {
        "deberta_v3_extra_small_en": (70_682_112, "72906693"),
        "deberta_v3_small_en": (141_304_320, "35992f8e"),
        "deberta_v3_base_en": (183_831_552, "05ee1a93"),
        "deberta_v3_large_en": (434_012_160, "0f1b4850"),
        "deberta_v3_base_multi": (278_218_752, "6534aca1"),
    },
    "DeepSeekV3Backbone": {
        "deepseek_v3_671b": (671_026_419_200, "49634f91"),
    },
    "DistilBertBackbone": {
        "distil_bert_base_en_uncased": (66_362_880, "c228b52b"),
    },
    "ElectraBackbone": {
        "electra_small_discriminator_uncased_en": (13_548_800, "82927a0e"),
        "electra_base_discriminator_uncased_en": (109_482_240, "8dcca120"),
    },
    "FNetBackbone": {
        "f_net_base_en": (82_861_056, "85d08dff"),
        "f_net_large_en": (236_945_408, "e56dc08e"),
    },
    "FalconBackbone": {
        "falcon_refinedweb_1b_en": (1_311_625_216, "9999dc1e"),
    },
    "GPT2Backbone": {
        "gpt2_base_en": (124_439_808, "51add73d"),
        "gpt2_medium_en": (354_823_168, "12398065"),
        "gpt2_large_en": (774_030_080, "4672d892"),
        "gpt2_extra_large_en": (1_557_611_200, "73b29784"),
    },
    "GPTNeoXBackbone": {
        "pythia_410m_en": (353_822_720, "469131e2"),
        "pythia_1.4b_en": (1_311_625_216, "b88e3421"),
    },
    "Gemma3Backbone": {
        "gemma3_270m": (268_098_176, "b86c77bc"),
        "gemma3_1b": (999_885_952, "4d569581"),
        "gemma3_4b_text": (3_880_099_328, "93d79d13"),
        "gemma3_12b_text": (11_765_788_416, "7c2f3238"),
        "gemma3_27b_text": (27_009_002_240, "bd0387bf"),
        "gemma3_4b": (4_299_915_632, "77276e64"),
        "gemma3_12b": (12_187_079_280, "a158132f"),
        "gemma3_27b": (27_432_062_576, "e67b4ba1"),
    },
    "Gemma4Backbone": {
        "gemma4_2b": (4_628_569_379, "c891e92d"),
        "gemma4_4b": (7_463_013_418, "474e1d30"),
        "gemma4_26b_a4b": (25_233_141_790, "23758622"),
        "gemma4_31b": (30_697_345_340, "3eaf5010"),
    },
    "GemmaBackbone": {
        "gemma_2b_en": (2_506_172_416, "b1fcbbe8"),
        "gemma_instruct_2b_en": (2_506_172_416, "b1fcbbe8"),
        "gemma_7b_en": (8_537_680_896, "01800a9c"),
        "gemma_instruct_7b_en": (8_537_680_896, "01800a9c"),
        "gemma2_2b_en": (2_614_341_888, "63c6f5bf"),
        "gemma2_9b_en": (9_241_705_984, "0b944355"),
        "gemma2_27b_en": (27_227_128_320, "60fc7385"),
    },
    "GptOssBackbone": {
        "gpt_oss_20b_en": (20_914_757_184, "ec848a91"),
        "gpt_oss_120b_en": (116_829_156_672, "ccf59663"),
        "gpt_oss_safeguard_20b_en": (20_914_757_184, "ec848a91"),
        "gpt_oss_safeguard_120b_en": (116_829_156_672, "ccf59663"),
    },
    "Llama3Backbone": {
        "llama3_8b_en": (8_030_261_248, "20976d70"),
        "llama3.2_1b": (1_235_814_400, "ba260613"),
        "llama3.2_3b": (3_212_749_824, "01c0bdf6"),
    },
    "Llama4Backbone": {
        "llama4_scout_17b_16e": (107_769_861_120, "a6c29572"),
        "llama4_maverick_17b_128e": (400_711_848_960, "f8bc29d8"),
    },
    "LlamaBackbone": {
        "llama2_7b_en": (6_738_415_616, "bbfed4f4"),
    },
    "MistralBackbone": {
        "mistral_7b_en": (7_241_732_096, "2b3b6452"),
        "mistral_0.3_7b_en": (7_248_023_552, "5b8c2cd5"),
    },
    "MixtralBackbone": {
        "mixtral_8_7b_en": (46_702_792_704, "fafd568c"),
    },
    "OPTBackbone": {
        "opt_125m_en": (125_237_760, "2a161eb6"),
        "opt_1.3b_en": (1_315_753_984, "395d102d"),
        "opt_2.7b_en": (2_651_591_680, "92af6b2c"),
        "opt_6.7b_en": (6_658_465_792, "2002f933"),
    },
    "PaliGemmaBackbone": {
        "pali_gemma_3b_mix_224": (2_923_335_408, "17ce3b16"),
        "pali_gemma_3b_mix_448": (2_924_220_144, "924b36a8"),
        "pali_gemma_3b_224": (2_923_335_408, "17ce3b16"),
        "pali_gemma_3b_448": (2_924_220_144, "924b36a8"),
        "pali_gemma_3b_896": (2_927_759_088, "68410f9d"),
        "pali_gemma_2_ft_docci_3b_448": (3_032_979_696, "9da3b388"),
        "pali_gemma2_ft_docci_10b_448": (9_663_294_192, "5c00315f"),
        "pali_gemma2_mix_3b_224": (3_032_094_960, "e31b4285"),
        "pali_gemma2_mix_3b_448": (3_032_979_696, "9da3b388"),
        "pali_gemma2_mix_10b_224": (9_662_409_456, "03295da1"),
        "pali_gemma2_mix_10b_448": (9_663_294_192, "5c00315f"),
        "pali_gemma2_mix_28b_224": (27_650_192_112, "2698c3ba"),
        "pali_gemma2_mix_28b_448": (27_651_076_848, "e60e5ab2"),
        "pali_gemma2_pt_3b_224": (3_032_094_960, "e31b4285"),
        "pali_gemma2_pt_3b_448": (3_032_979_696, "9da3b388"),
        "pali_gemma2_pt_3b_896": (3_036_518_640, "0b59aadf"),
        "pali_gemma2_pt_10b_224": (9_662_409_456, "03295da1"),
        "pali_gemma2_pt_10b_448": (9_663_294_192, "5c00315f"),
        "pali_gemma2_pt_10b_896": (9_666_833_136, "0aa22a85"),
        "pali_gemma2_pt_28b_224": (27_650_192_112, "2698c3ba"),
        "pali_gemma2_pt_28b_448": (27_651_076_848, "e60e5ab2"),
        "pali_gemma2_pt_28b_896": (27_654_615_792, "ad107c13"),
    },
    "Phi3Backbone": {
        "phi3_mini_4k_instruct_en": (3_821_079_552, "8a96868e"),
    },
    "Qwen3Backbone": {
        "qwen3_0.6b_en": (596_049_920, "1d9649b7"),
        "qwen3_8b_en": (8_190_735_360, "4a1398f1"),
    },
    "Qwen3MoeBackbone": {
        "qwen3_moe_30b_a3b_en": (30_532_122_624, "8e843973"),
        "qwen3_moe_235b_a22b_en": (235_093_634_560, "89b459e5"),
        "qwen3_coder_instruct_30b_a3b_en": (30_532_122_624, "f08ae3ef"),
    },
    "Qwen3_5Backbone": {
        "qwen3_5_0.8b_base": (752_393_024, "d99ad4ef"),
        "qwen3_5_0.8b": (752_393_024, "d99ad4ef"),
        "qwen3_5_2b_base": (1_881_825_088, "5425c896"),
        "qwen3_5_2b": (1_881_825_088, "5425c896"),
        "qwen3_5_4b_base": (4_205_751_296, "1dc4154d"),
        "qwen3_5_4b": (4_205_751_296, "1dc4154d"),
        "qwen3_5_9b_base": (8_953_803_264, "f0ab9b9a"),
        "qwen3_5_9b": (8_953_803_264, "f0ab9b9a"),
        "qwen3_5_27b": (26_895_998_464, "5fbccaef"),
        "qwen3_6_27b": (26_895_998_464, "5fbccaef"),
        "qwen3_8_27b": (26_895_998_464, "5fbccaef"),
    },
    "Qwen3_5MoeBackbone": {
        "qwen3_5_moe_35b_a3b_base": (34_660_610_688, "334c48d8"),
        "qwen3_5_moe_35b_a3b": (34_660_610_688, "334c48d8"),
        "qwen3_6_moe_35b_a3b": (34_660_610_688, "334c48d8"),
        "qwen_agent_world_35b_a3b": (34_660_610_688, "334c48d8"),
    },
    "QwenBackbone": {
        "qwen2.5_0.5b_en": (494_032_768, "75eeb951"),
        "qwen2.5_3b_en": (3_085_938_688, "9a1a0def"),
        "qwen2.5_7b_en": (7_615_616_512, "c791af7b"),
    },
    "QwenMoeBackbone": {
        "qwen1.5_moe_2.7b_en": (14_315_784_192, "f3ee8e92"),
    },
    "RobertaBackbone": {
        "roberta_base_en": (124_052_736, "c66637f7"),
        "roberta_large_en": (354_307_072, "013d78b0"),
    },
    "SmolLM3Backbone": {
        "smollm3_3b_en": (3_075_098_624, "85813b34"),
    },
    "T5Backbone": {
        "t5_small_multi": (60_506_624, "7fc754f1"),
        "t5_base_multi": (222_903_552, "f4bad22f"),
        "t5_large_multi": (737_668_096, "671fa4f5"),
        "t5_1.1_small": (60_511_616, "92b708e1"),
        "t5_1.1_base": (247_577_856, "ac7b96fb"),
        "t5_1.1_large": (750_251_008, "f259c02b"),
        "t5_1.1_xl": (2_849_757_184, "2ca7dcda"),
        "t5_1.1_xxl": (11_135_332_352, "9ba1c0fd"),
        "flan_small_multi": (76_961_152, "7a9e31dc"),
        "flan_base_multi": (247_577_856, "ac7b96fb"),
        "flan_large_multi": (783_150_080, "3b99f20d"),
    },
    "T5Gemma2Backbone": {
        "t5gemma2_270m_270m": (536_196_352, "06667dd0"),
        "t5gemma2_1b_1b": (1_999_771_904, "f82cef72"),
        "t5gemma2_4b_4b": (7_760_198_656, "3be717fd"),
    },
    "T5GemmaBackbone": {
        "t5gemma_s_s_ul2": (312_517_632, "af0215f7"),
        "t5gemma_b_b_ul2": (591_490_560, "329eb797"),
        "t5gemma_l_l_ul2": (1_241_761_792, "df08198e"),
        "t5gemma_xl_xl_ul2": (3_766_980_608, "a9449904"),
        "t5gemma_2b_2b_ul2": (5_596_853_760, "e7daa489"),
        "t5gemma_9b_2b_ul2": (12_292_375_296, "f6c9d3e8"),
        "t5gemma_9b_9b_ul2": (20_333_401_088, "f09c600a"),
    },
    "WhisperBackbone": {
        "whisper_tiny_en": (37_760_256, "6d475d8d"),
        "whisper_base_en": (72_593_408, "7852c2bc"),
        "whisper_small_en": (241_734_144, "5f16437d"),
        "whisper_medium_en": (763_856_896, "3ccd3b9b"),
        "whisper_tiny_multi": (37_760_640, "d0501def"),
        "whisper_base_multi": (72_593_920, "f96e5a62"),
        "whisper_small_multi": (241_734_912, "019422cc"),
        "whisper_medium_multi": (763_857_920, "14b75342"),
        "whisper_large_multi": (1_543_304_960, "b21b678f"),
        "whisper_large_multi_v2": (1_543_304_960, "b21b678f"),
    },
    "XLMRobertaBackbone": {
        "xlm_roberta_base_multi": (277_450_752, "8eb4c32f"),
        "xlm_roberta_large_multi": (558_837_760, "a73c83b6"),
    },
}
