# trainscope_strict(<target>): -Wall -Wextra -Werror on our own targets.
function(trainscope_strict target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wno-error=deprecated-declarations)
endfunction()
