#include <chrono>
#include <thread>
#include <vector>
#include <algorithm>
#include <cstdio>
#include <mutex>
using C=std::chrono::steady_clock;
int main(){
  std::vector<char> buf(64<<20);
  for(auto&c:buf)c=1;
  for(int stride: {64,4096}) for(int k: {0,8,16,32,64,128}){
    std::vector<double> ns; long sink=0; std::mutex m;
    auto next=C::now();
    for(int i=0;i<3000;i++){
      next+=std::chrono::microseconds(1000);
      auto a=C::now();
      {std::lock_guard l(m); for(int j=0;j<k;j++) sink+=buf[(size_t)j*stride*7 % buf.size()];}
      auto b=C::now();
      ns.push_back((b-a).count());
      std::this_thread::sleep_until(next);
    }
    std::nth_element(ns.begin(),ns.begin()+ns.size()/2,ns.end());
    printf("stride %d lines %d median %.0f ns (%ld)\n",stride,k,ns[ns.size()/2],sink%2);
  }
}
