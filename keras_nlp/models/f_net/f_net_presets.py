"""Built-in F-Net preset configs (configs only: no weights are bundled).

Google's English F-Net sizes in the keras-hub format: a 32000-token
SentencePiece vocabulary (2^8 x 125, so every model axis up to 256
divides it), 512 positions, four segment ids, and a feed-forward four
times the hidden width. There are no heads.
"""


def _f_net(num_layers, hidden_dim):
    return {
        "vocabulary_size": 32000,
        "num_layers": num_layers,
        "hidden_dim": hidden_dim,
        "intermediate_dim": 4 * hidden_dim,
        "dropout": 0.1,
        "max_sequence_length": 512,
        "num_segments": 4,
    }


F_NET_PRESETS = {
    "f_net_base_en": _f_net(num_layers=12, hidden_dim=768),
    "f_net_large_en": _f_net(num_layers=24, hidden_dim=1024),
}
