"""Callbacks that watch a run from inside a training framework and write the doctor's report when it ends:
`trainspeed.integrations.lightning.TrainspeedCallback` (Lightning) and
`trainspeed.integrations.transformers.TrainspeedCallback` (Hugging Face's Trainer). Each imports its framework
only when used: the extras `trainspeed[lightning]` and `trainspeed[transformers]`.
"""
