"""The report page's style and script, inlined into every file: no CDN, no network, no fonts to fetch."""

from __future__ import annotations

CSS = """
:root{--bg:#f7f7f9;--fg:#1d1f24;--muted:#666b75;--card:#fff;--line:#dfe1e6;--pass:#2e9d5b;
--partial:#d8a32a;--fail:#8a909c;--err:#d1434b;--run:#3b7dd8;--input:#a245b5;--accent:#3b4cca}
@media (prefers-color-scheme:dark){:root{--bg:#15171c;--fg:#e4e6eb;--muted:#9aa0ab;--card:#1e2128;
--line:#30343d;--fail:#6f7583}}
*{box-sizing:border-box}
body{margin:0;padding:24px;background:var(--bg);color:var(--fg);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
header h1{font-size:20px;margin:0 0 4px}
.meta,.sub,.muted{color:var(--muted)}
.meta{margin:0 0 16px;font-size:12px}
h2{font-size:17px;margin:0 0 2px;word-break:break-all}
h3{font-size:14px;margin:18px 0 8px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted)}
.runs{display:grid;gap:20px;grid-template-columns:repeat(var(--cols,1),minmax(0,1fr))}
.run{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:18px;min-width:0}
.kpis{display:grid;grid-template-columns:repeat(auto-fill,minmax(130px,1fr));gap:10px;margin:14px 0}
.kpi{border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.kpi .label{display:block;font-size:11px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted)}
.kpi .value{display:block;font-size:22px;font-weight:600;font-variant-numeric:tabular-nums}
.kpi .sub{display:block;font-size:11px}
.kpi.bad .value{color:var(--err)}
.charts{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}
figure{margin:0}
figcaption{font-size:12px;color:var(--muted);margin-top:4px}
.legend{list-style:none;padding:0;margin:6px 0 0;font-size:12px}
.legend li{display:inline-block;margin-right:10px}
.sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:-1px}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);white-space:nowrap}
th.run-id{text-transform:none;letter-spacing:0;white-space:normal;word-break:break-all}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th[aria-sort=ascending]::after{content:" \\25B2"}
table.sortable th[aria-sort=descending]::after{content:" \\25BC"}
.msg{white-space:pre-wrap;word-break:break-word;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.status{font-weight:600;white-space:nowrap}
.status.pass{color:var(--pass)}.status.warn{color:var(--partial)}.status.fail{color:var(--err)}
.status.skip{color:var(--muted)}
.verdict{display:inline-block;padding:2px 10px;border-radius:999px;font-weight:700;color:#fff;background:var(--accent)}
.verdict.done{background:var(--pass)}.verdict.act{background:var(--partial)}
.verdict.look{background:var(--err)}.verdict.wait{background:var(--run)}.verdict.input{background:var(--input)}
.pos{color:var(--pass)}.neg{color:var(--err)}
.notes li{margin:2px 0}
.comparison{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:18px;margin-top:20px}
footer{margin-top:24px;font-size:12px;color:var(--muted)}
"""

# Sorting for every `table.sortable`: a click on a header sorts by that column (again:
# reverse); cells sort by their data-sort value, numbers numerically, blanks last. A
# `#sort=<table id>:<column key>:<asc|desc>` fragment sorts on load (links can share a view).
JS = r"""
(function(){
  function key(td){var v=td?td.getAttribute('data-sort'):null;if(v===null)v=td?td.textContent:'';return v;}
  function cmp(a,b,dir){
    var ea=(a===''),eb=(b==='');if(ea||eb)return ea===eb?0:(ea?1:-1);
    var na=Number(a),nb=Number(b);
    var r=(!isNaN(na)&&!isNaN(nb))?na-nb:a.localeCompare(b);
    return dir==='descending'?-r:r;
  }
  function sortBy(table,th,dir){
    var idx=Array.prototype.indexOf.call(th.parentNode.children,th);
    var body=table.tBodies[0];var rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(x,y){var c=cmp(key(x.cells[idx]),key(y.cells[idx]),dir);
      return c!==0?c:(+x.getAttribute('data-i'))-(+y.getAttribute('data-i'));});
    rows.forEach(function(r){body.appendChild(r);});
    Array.prototype.forEach.call(th.parentNode.children,function(h){h.removeAttribute('aria-sort');});
    th.setAttribute('aria-sort',dir);
  }
  var tables=document.querySelectorAll('table.sortable');
  Array.prototype.forEach.call(tables,function(table){
    Array.prototype.forEach.call(table.tBodies[0].rows,function(r,i){r.setAttribute('data-i',i);});
    Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th){
      th.addEventListener('click',function(){
        sortBy(table,th,th.getAttribute('aria-sort')==='ascending'?'descending':'ascending');});
    });
  });
  var m=/^#sort=([^:]+):([^:]+):(asc|desc)$/.exec(decodeURIComponent(location.hash||''));
  if(m){var t=document.getElementById(m[1]);
    var th=t&&t.querySelector('th[data-key="'+m[2]+'"]');
    if(th)sortBy(t,th,m[3]==='asc'?'ascending':'descending');}
  document.documentElement.setAttribute('data-ready','1');
})();
"""
