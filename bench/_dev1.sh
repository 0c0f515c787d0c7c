for s in 2048 8192; do
ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum -k regex:"bwd_preprocess|run_kernel_sm90|bwd_convert" --launch-skip 40 --launch-count 12 .ab/base base $s 2>&1 | grep -E "bwd_preprocess|run_kernel|bwd_convert|gpu__time_duration" | sed -E 's/(.{0,60}).*(Lb[01]E+N[^ ]{0,40}).*/\1 \2/' | cut -c1-160
done
