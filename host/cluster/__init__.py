"""Beyond one machine: a matrix resolved into a job dir (`orchestrate.py plan`), run by a
cluster scheduler as arrays of `python -m bench cell` (`orchestrate.py slurm`, `orchestrate.py
k8s`), then merged by `orchestrate.py report` like any result dirs. No scheduler of the kit's
own: Slurm job arrays and Kubernetes Indexed Jobs run the same cells the host's scheduler runs.

    jobdir.py   the job dir: plan, manifest, specs, resource shapes, reading it back (untrusted)
    slurm.py    sbatch array scripts (native venv or Apptainer), submit, follow, settle, rerun
    k8s.py      a ConfigMap of specs and one Indexed Job per shape
"""
