"""The text the miniature tokenizers are trained on, written for this project.

A few KB is enough for a byte-level BPE of about a thousand tokens; any byte still encodes,
because byte-level BPE starts from all 256 bytes. Changing this text changes every
miniature's tokenizer, so do it together with a FORMAT_VERSION bump in `cache.py`.
"""

from __future__ import annotations

from typing import Final

CORPUS: Final = """\
A switchyard is a place where railway wagons are sorted. Trains arrive, the wagons are
uncoupled, and a small engine pushes them over a hump so that gravity rolls each one onto the
track of its next train. The yard master decides which track each wagon takes, and the points
are thrown before the wagon reaches them. When the yard works well, nobody notices it at all.

Serving large language models is similar. Requests arrive, each one names a model, and a
router sends it to the engine that holds that model. The engines live on machines with
accelerators, and every accelerator has a fixed amount of memory. The weights must fit, the
key and value cache must fit, and there must be room left for activations. A plan that does
not fit should be refused before anything is downloaded, not after an hour of copying files.

The user asks: which model is loaded now? The assistant answers: two models are loaded, one
on four devices and one on the other four. The user asks: can we swap the second model for a
new one without stopping the first? The assistant answers: yes, the new model is loaded on
the same devices after the old one is put to sleep, and if it fails to load, the old one
comes back. Requests for the first model keep flowing the whole time.

Hello! How are you today? I am fine, thank you. What would you like to know? Tell me about
the weather. It is sunny in the morning, cloudy at noon, and it rains in the evening. The
temperature is 21 degrees at ten o'clock and 17 degrees at six o'clock. Please write a short
poem about a river. The river runs to the sea, past the mill and the old oak tree; it carries
leaves and light and sand, and sings the same song through the land.

def plan(model, devices):
    weights_per_device = model.weights_bytes / devices.tensor_parallel
    free = devices.memory_bytes * 0.9 - weights_per_device
    if free <= 0:
        return Refused("the weights do not fit on one device")
    tokens = free // model.kv_bytes_per_token
    return Admitted(kv_cache_tokens=tokens)

for layer in range(num_layers):
    hidden = attention(norm(hidden)) + hidden
    hidden = mixture_of_experts(norm(hidden)) + hidden

Numbers appear everywhere: 0 1 2 3 4 5 6 7 8 9 10 16 32 64 128 256 512 1024 2048 4096 8192.
Sizes are written as 96 GB, 141 GB, 80 GB; speeds as 61 tokens per second or 4,000 tokens
per second; times as 75 s, 36 min, 8.4 s. A model with 384 experts routes each token to 8 of
them, and one shared expert sees every token. Another model has 256 experts and no shared
expert. Attention with grouped query heads keeps 8 key and value heads for 48 query heads.
Latent attention stores a compressed vector of 512 values plus 64 rotary values per token.

The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs. Sphinx
of black quartz, judge my vow. How vexingly quick daft zebras jump! These sentences use every
letter of the alphabet, which helps a small tokenizer see them all: a b c d e f g h i j k l m
n o p q r s t u v w x y z, A B C D E F G H I J K L M N O P Q R S T U V W X Y Z.

Punctuation matters too: commas, periods. Questions? Exclamations! Colons: semicolons; quotes
"like this" and 'like that'; brackets (round), [square] and {curly}; paths like /data/models
and ../shared/reference; symbols such as + - * / = < > % & | ^ ~ @ # $ _ and the backslash \\.

To start the service, run the setup command once and then the run command. The first one
creates a virtual environment and installs the packages; the second one starts the cluster,
the controller and the endpoint. When a node joins, its devices are counted and its free disk
is measured. When a node leaves, the models it held are marked as unavailable, and requests
for them are answered with a clear error instead of a timeout. Logs say what happened and
why, in one line each, so that an operator can read them at three in the morning.

Small models are useful for tests. They have the same shape as the large ones, with the same
kinds of layers, but far fewer of each. Their weights are random, so their answers make no
sense, yet the engine loads them, schedules them and streams their tokens exactly as it would
for a real model. A test that passes with a small model tells us the plumbing works; a
benchmark with a large model tells us how fast it is. Both are needed, and neither replaces
the other.
"""
