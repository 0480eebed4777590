"""cifar-opt backends: one thin module per device (available, create). The trainer is
bench.studies.cifar_opt.trainer.Trainer for all three; what differs is whether the
device is there."""
