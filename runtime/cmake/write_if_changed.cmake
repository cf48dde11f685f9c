# deltac_write_if_changed(PATH TEXT): writes TEXT to PATH unless PATH already
# holds it (so its dependents rebuild only when it changes). For -P scripts.
function(deltac_write_if_changed path text)
  set(old "")
  if(EXISTS "${path}")
    file(READ "${path}" old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE "${path}" "${text}")
  endif()
endfunction()
