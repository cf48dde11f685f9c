# The runtime's precompiled CUDA instances, one translation unit each (one
# CUDA module each: a first launch loads only its own module, issue #9).
# Which instances exist is the catalogue's: the (K, V) lists
# DELTAC_CUDA_CHUNKED_DIMS and DELTAC_CUDA_RECURRENT_DIMS are read from
# catalogue.h here, and the dispatch (src/cuda_dispatch.h) switches over the
# same lists, so a list entry without its unit fails to link.
# Sets DELTAC_CUDA_INSTANCE_SOURCES.
set(_catalogue ${PROJECT_SOURCE_DIR}/catalogue/include/deltac/catalogue.h)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_catalogue})
file(READ ${_catalogue} _text)

# The "K;V;K;V;..." pairs of the X-macro list `name`.
function(deltac_dims_list name out)
  string(REGEX MATCH "#define ${name}\\(X\\)([^\n]*\\\\\n)*[^\n]*" _def "${_text}")
  string(REGEX MATCHALL "X\\( *[0-9]+ *, *[0-9]+ *\\)" _items "${_def}")
  if(NOT _items)
    message(FATAL_ERROR "no entries of ${name} found in ${_catalogue}")
  endif()
  set(_pairs "")
  foreach(_it ${_items})
    string(REGEX REPLACE "X\\( *([0-9]+) *, *([0-9]+) *\\)" "\\1;\\2" _kv "${_it}")
    list(APPEND _pairs ${_kv})
  endforeach()
  set(${out} ${_pairs} PARENT_SCOPE)
endfunction()

set(_gen ${CMAKE_CURRENT_BINARY_DIR}/gen/cuda)
set(DELTAC_CUDA_INSTANCE_SOURCES "")
set(_variants DELTA GATED KDA)
set(_types "f32:float" "bf16:__nv_bfloat16" "f16:__half")
# Recurrent units split by state dtype too: a first decode call loads only
# its state dtype's kernels (issue #8's first-call cost).
set(_states "f32:DELTAC_F32" "bf16:DELTAC_BF16" "fp8:DELTAC_FP8_E4M3")

# One unit: family CHUNKED or RECURRENT, args of its instance macro.
function(deltac_cuda_unit name family args)
  set(DELTAC_FAMILY ${family})
  string(TOLOWER ${family} DELTAC_FAMILY_FILE)
  set(DELTAC_ARGS ${args})
  configure_file(${CMAKE_CURRENT_SOURCE_DIR}/src/cuda_instance.cu.in ${_gen}/${name}.cu @ONLY)
  set(DELTAC_CUDA_INSTANCE_SOURCES ${DELTAC_CUDA_INSTANCE_SOURCES} ${_gen}/${name}.cu
      PARENT_SCOPE)
endfunction()

deltac_dims_list(DELTAC_CUDA_CHUNKED_DIMS _chunked)
deltac_dims_list(DELTAC_CUDA_RECURRENT_DIMS _recurrent)
foreach(_var ${_variants})
  string(TOLOWER ${_var} _v)
  foreach(_t ${_types})
    string(REPLACE ":" ";" _t ${_t})
    list(GET _t 0 _tn)
    list(GET _t 1 _tc)
    set(_kv ${_chunked})
    while(_kv)
      list(POP_FRONT _kv _k _vd)
      deltac_cuda_unit(chunked_${_v}_${_tn}_${_k}x${_vd} CHUNKED
                       "DELTAC_VARIANT_${_var}, ${_tc}, ${_k}, ${_vd}")
    endwhile()
    if(_tn STREQUAL "f16")
      continue() # the recurrent family runs f32 and bf16
    endif()
    set(_kv ${_recurrent})
    while(_kv)
      list(POP_FRONT _kv _k _vd)
      foreach(_bv 16 32 64)
        math(EXPR _rem "${_vd} % ${_bv}")
        if(_rem EQUAL 0)
          foreach(_s ${_states})
            string(REPLACE ":" ";" _s ${_s})
            list(GET _s 0 _sn)
            list(GET _s 1 _sc)
            deltac_cuda_unit(recurrent_${_v}_${_tn}_${_k}x${_vd}_bv${_bv}_s${_sn} RECURRENT
                             "DELTAC_VARIANT_${_var}, ${_tc}, ${_k}, ${_vd}, ${_bv}, ${_sc}")
          endforeach()
        endif()
      endforeach()
    endwhile()
  endforeach()
endforeach()
list(LENGTH DELTAC_CUDA_INSTANCE_SOURCES _n)
message(STATUS "deltac: ${_n} precompiled CUDA instance units")
