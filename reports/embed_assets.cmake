# Generates a C++ source holding the HTML report's stylesheet and scripts (reports/html/*), so the report
# stays one self-contained file while its CSS and JavaScript are real files that can be read and linted.
# Inputs: OUT (the .cpp to write), DIR (reports/html).
set(body "// Generated from reports/html/ by reports/embed_assets.cmake; do not edit.\n")
string(APPEND body "#include \"locksim/reports/html_assets.hpp\"\nnamespace locksim::html_assets {\n")
foreach(pair "css;report.css" "layout_js;layout.js" "report_js;report.js")
  list(GET pair 0 name)
  list(GET pair 1 file)
  file(READ ${DIR}/${file} text)
  string(FIND "${text}" ")locksim_asset" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${DIR}/${file} contains the raw-string delimiter )locksim_asset")
  endif()
  string(APPEND body "const std::string_view ${name} = R\"locksim_asset(${text})locksim_asset\";\n")
endforeach()
string(APPEND body "}  // namespace locksim::html_assets\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
