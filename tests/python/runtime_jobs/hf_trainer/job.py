"""Hugging Face Trainer with its own MLflow logging (report_to="mlflow", unchanged), on the CPU:
a tiny random Llama, MAX_STEPS optimizer steps over random token rows, logging every 2 steps.
The Trainer's MLflowCallback resumes the run air created (MLFLOW_RUN_ID) and logs its
arguments (max_steps among them) as params and loss, learning_rate, epoch ... with steps."""
import os

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments


class RandomRows(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


def main():
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2,
                                         num_key_value_heads=2, max_position_embeddings=32))
    args = TrainingArguments(output_dir=os.environ["JOB_OUT"], max_steps=int(os.environ["MAX_STEPS"]),
                             per_device_train_batch_size=4, logging_steps=2, report_to=["mlflow"],
                             use_cpu=True, save_strategy="no", disable_tqdm=True,
                             dataloader_num_workers=0)
    Trainer(model=model, args=args, train_dataset=RandomRows()).train()


if __name__ == "__main__":
    main()
