"""The shapes model's text encoder: learned word embeddings over the caption grammar's words.

A caption is split into lowercase words; each known word is one token, anything else is the
unknown token, and the sequence is padded (with a learned padding token) or cut to `max_length`.
The encoder returns the token embeddings (the transformer's `encoder_hidden_states`) and a pooled
vector, a learned projection of the mean of the non-padding embeddings (its
`pooled_projections`). The empty caption, all padding, is the unconditional input of
classifier-free guidance.

A `ModelMixin`/`ConfigMixin`, so `save_pretrained`/`from_pretrained` handle it like any diffusers
model; the vocabulary lives in its config.
"""

from __future__ import annotations

import torch
from diffusers.configuration_utils import ConfigMixin, register_to_config
from diffusers.models.modeling_utils import ModelMixin
from torch import nn

PAD, UNKNOWN = 0, 1  # token ids; the vocabulary's words follow


class ShapesTextEncoder(ModelMixin, ConfigMixin):  # type: ignore[misc]  # diffusers types config_name str in one, None in the other
    """Word embeddings: captions -> (token embeddings B x L x dim, pooled B x dim)."""

    @register_to_config
    def __init__(self, vocabulary: list[str], dim: int = 64, max_length: int = 8) -> None:
        super().__init__()
        self.ids = {word: i + 2 for i, word in enumerate(vocabulary)}
        self.embedding = nn.Embedding(len(vocabulary) + 2, dim)
        self.pool = nn.Linear(dim, dim)
        nn.init.normal_(self.embedding.weight, std=1.0)

    def tokenize(self, prompts: list[str], max_length: int | None = None) -> torch.Tensor:
        """Token ids (B x max_length) of the prompts; unknown words map to the unknown token."""
        length = max_length or self.config["max_length"]
        rows = []
        for prompt in prompts:
            ids = [self.ids.get(word, UNKNOWN) for word in prompt.lower().split()][:length]
            rows.append(ids + [PAD] * (length - len(ids)))
        return torch.tensor(rows, dtype=torch.long, device=self.device)

    def unknown_words(self, prompt: str) -> list[str]:
        return [word for word in prompt.lower().split() if word not in self.ids]

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.embedding(input_ids)
        keep = (input_ids != PAD).to(hidden.dtype).unsqueeze(-1)
        mean = (hidden * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)
        return hidden, self.pool(mean)
