"""A PRM run by ``transformers`` in this process: P(correct) at each step's readout position, batched."""

from __future__ import annotations

from collections.abc import Sequence

from bot_grpo_verl.rewards.prm_formats import PRMFormat


def single_token_id(tokenizer, token: str) -> int:
    """The id of ``token``, which must encode to exactly one token (else ``ValueError``)."""
    ids = tokenizer.encode(token, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"the PRM tokenizer encodes {token!r} as {len(ids)} tokens {ids}, expected exactly one")
    return ids[0]


class LocalPRM:
    """A PRM run by ``transformers`` in this process.

    ``"classifier"`` formats load ``AutoModelForTokenClassification`` (2 labels), or ``AutoModel`` when
    ``trust_remote_code`` is set and the checkpoint maps its own class (Qwen2.5-Math-PRM ships its head as
    remote code; its output's first element is the ``[batch, tokens, 2]`` logits, as a token classifier's).
    ``"lm_pair"`` formats load ``AutoModelForCausalLM``.
    """

    def __init__(self, fmt: PRMFormat, model_path: str, tokenizer, device: str, dtype: str, trust_remote_code: bool):
        from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForTokenClassification

        config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
        if fmt.head == "lm_pair":
            model_class = AutoModelForCausalLM
        elif trust_remote_code and getattr(config, "auto_map", None):
            model_class = AutoModel
        else:
            model_class = AutoModelForTokenClassification
        self.device = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, self.device)
        self.model = model_class.from_pretrained(model_path, dtype=torch_dtype, trust_remote_code=trust_remote_code)
        self.model.to(self.device).eval()
        self.fmt = fmt
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.pair_ids = (
            [single_token_id(tokenizer, fmt.plus), single_token_id(tokenizer, fmt.minus)]
            if fmt.head == "lm_pair"
            else None
        )
        self.max_tokens = getattr(config, "max_position_embeddings", None)

    def probabilities(self, batch_ids: Sequence[Sequence[int]], batch_positions: Sequence[Sequence[int]]):
        """P(correct) at each readout position: ``list[list[float]]`` shaped like ``batch_positions``.

        One right-padded forward pass over the batch under ``torch.no_grad``.
        """
        import torch

        width = max(len(ids) for ids in batch_ids)
        input_ids = torch.full((len(batch_ids), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(batch_ids), width), dtype=torch.long)
        for row, ids in enumerate(batch_ids):
            input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, : len(ids)] = 1
        with torch.no_grad():
            output = self.model(input_ids=input_ids.to(self.device), attention_mask=attention_mask.to(self.device))
        # Element 0 is the logits for transformers' outputs (no labels given) and Qwen2.5-Math-PRM's.
        logits = output[0].float()
        if self.fmt.head == "classifier" and logits.shape[-1] != 2:
            raise ValueError(f"a {self.fmt.name!r} PRM needs a 2-label head, the model gives {logits.shape[-1]} labels")
        result = []
        for row, positions in enumerate(batch_positions):
            rows = logits[row, list(positions)]
            if self.fmt.head == "lm_pair":
                result.append(rows[:, self.pair_ids].softmax(dim=-1)[:, 0].tolist())
            else:
                result.append(rows.softmax(dim=-1)[:, 1].tolist())
        return result


def resolve_device(device: str) -> str:
    """``"auto"``: ``"cuda"`` when available, else ``"cpu"``; any other value is returned as is."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(dtype: str, device: str):
    """The torch dtype named by ``dtype``; ``"auto"``: bfloat16 on CUDA, float32 elsewhere."""
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if not isinstance(getattr(torch, dtype, None), torch.dtype):
        raise ValueError(f"prm_dtype={dtype!r} is not a torch dtype name (float32, bfloat16, float16) or 'auto'")
    return getattr(torch, dtype)
