"""`trainspeed doctor --fix`: the verdicts' fixes written as an edit of the script the doctor ran, a unified diff
(`plan.make_patch`) that `git apply` and `patch -p1` take; libcst reads and rewrites the script, keeping its comments
and layout (`source`), one kind of edit a module (`edits`, `loaders`, `dtype`)."""
